"""Stand-in SDK module: present so the launcher's preflight finds the SDK; the
tests replace the OpenEnv provider's adapter, the only code that would use it."""
