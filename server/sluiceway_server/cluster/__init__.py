"""The control-plane cluster: executor membership and task assignment (no leader election yet)."""
