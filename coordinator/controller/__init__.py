"""The controller of a ZooKeeper cluster (Kafka 3.9's kafka.controller), as a pure state machine:
ZooKeeper's contents and the brokers' requests come in as events, the ZooKeeper writes and the
requests to send to brokers go out as actions (coordinator/controller/actions.py). The trio and
kazoo shell that runs for controller and carries the actions out is server/zookeeper/controller.py."""
