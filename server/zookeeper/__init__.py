"""What ZooKeeper mode (`zookeeper.connect`) adds to a broker, in Kafka 3.9's layout: the kazoo client,
registration, the controller's I/O shell and its channel to the brokers, the metadata the
controller sends and the metadata the brokers share through ZooKeeper, producer id blocks,
controlled shutdown."""
