"""Code that measures ncclcheck: the network-namespace lab, the simulators and the benchmark drivers behind scripts/."""
