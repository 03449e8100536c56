"""Early-exit training schemes, one file each, registered lazily in eebench.methods.base."""
