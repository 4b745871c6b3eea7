"""The shells of the sans-I/O coordinators (coordinator/): their runtime, the group and transaction
services that feed them requests and a clock and carry out their actions, transaction markers."""
