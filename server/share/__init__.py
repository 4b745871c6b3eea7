"""Share groups on the broker (KIP-932): the share partitions this broker leads, their sessions and
long polls, and the persister that keeps their state with the share coordinator."""
