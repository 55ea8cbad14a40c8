"""Providers: the SDK providers against local protocol servers, retries, pricing, and the
offline ones."""
