"""Package-wide rules: layers, start-up imports, declared dependencies, docstring examples."""
