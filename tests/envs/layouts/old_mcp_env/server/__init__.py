"""The tally env's server: `server.app:app`."""
