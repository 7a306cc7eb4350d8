"""The control-plane cluster: leader election from the cluster topic and the leader's
terms (election.py, leadership.py, term.py), executor membership and task assignment
(coordinator.py, members.py, assignor.py), released tasks and their fencing (releases.py), and the
leader's recorded answers to retried mutations (answers.py)."""
