"""flow's tests, one folder per layer of the package; helpers live in ``tests.support``.

Each folder is a package, so test modules are imported by their dotted path
(``tests.run.test_crash``) and two folders may hold files of the same name.
"""
