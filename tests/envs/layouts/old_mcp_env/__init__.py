"""A tally kept over MCP tools, served by openenv-core 0.2.2 (test fixture)."""
