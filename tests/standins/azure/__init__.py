"""Stand-in namespace (see azure/containerapps/sandbox)."""
