"""Leader election: the Raft state machine (raft.py), pure, driven by the instance."""
