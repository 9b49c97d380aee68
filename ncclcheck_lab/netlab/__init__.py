"""The network-namespace lab (scripts/netlab): hosts as namespaces on one machine, their scenarios, its launchers."""
