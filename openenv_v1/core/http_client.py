"""The HTTP clients the core opens: one TLS context per process (httpx loads the CA
bundle, about 20 ms of CPU, for every client otherwise), proxies never read from the
environment; and a server's HTTP base (`http_base`).

    async with async_client(timeout=10.0) as http:
        await http.get(f"{base_url}/schema")
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def shared_tls() -> ssl.SSLContext:
    """The process's TLS context (the default CA bundle), made once."""
    return httpx.create_ssl_context()


def http_base(url: str) -> str:
    """The HTTP base of a server URL OpenEnv may report as ws:// or wss://."""
    for ws, http in (("ws://", "http://"), ("wss://", "https://")):
        if url.startswith(ws):
            return http + url[len(ws) :]
    return url.rstrip("/")


def async_client(timeout: float | httpx.Timeout | None) -> httpx.AsyncClient:
    """An `httpx.AsyncClient` with the process's shared TLS context."""
    return httpx.AsyncClient(timeout=timeout, trust_env=False, verify=shared_tls())


def sync_client(timeout: float | httpx.Timeout | None) -> httpx.Client:
    """An `httpx.Client` with the process's shared TLS context."""
    return httpx.Client(timeout=timeout, trust_env=False, verify=shared_tls())


__all__ = ["async_client", "http_base", "shared_tls", "sync_client"]
