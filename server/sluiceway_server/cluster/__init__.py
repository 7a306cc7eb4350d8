"""The control-plane cluster: executor membership and task assignment (and, later, leader election)."""
