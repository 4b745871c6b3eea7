// What Java applications and Spark do with Kafka's own Java client (kafka-clients 4.4), one scenario
// group per run so that a JVM starts once per group:
//
//     java -cp BUILD:$HOME/.cache/samsa/kafka4/* JavaClient SCENARIO BOOTSTRAP PREFIX
//
// Each scenario prints JSON lines {"check": NAME, ...} on stdout (logs go to stderr) that
// compat-tests/test_java_client.py asserts on, the same on Samsa and on Apache Kafka. A scenario
// creates its own topics and groups, named from PREFIX.

import com.fasterxml.jackson.databind.ObjectMapper;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

@SuppressWarnings("removal") // listConsumerGroups: what the issue asks for (listGroups is its successor)
public final class JavaClient {
    static final ObjectMapper JSON = new ObjectMapper();
    static final Duration POLL = Duration.ofMillis(200);
    static final long DEADLINE_MS = 60_000;
    // CreateTime of record i: an hour ago plus i seconds, so offsetsForTimes has something to find.
    static final long BASE_TS = (System.currentTimeMillis() / 1000 - 3600) * 1000;

    final String bootstrap;
    final String prefix;

    JavaClient(String bootstrap, String prefix) {
        this.bootstrap = bootstrap;
        this.prefix = prefix;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: JavaClient produce|groups|seek|admin|transactions|acls|oauth BOOTSTRAP PREFIX");
            System.exit(2);
        }
        JavaClient c = new JavaClient(args[1], args[2]);
        switch (args[0]) {
            case "produce" -> c.produce();
            case "groups" -> c.groups();
            case "seek" -> c.seek();
            case "admin" -> c.adminScenario();
            case "transactions" -> c.transactions();
            case "acls" -> c.acls();
            case "oauth" -> c.oauth();
            default -> {
                System.err.println("unknown scenario " + args[0]);
                System.exit(2);
            }
        }
        // Client threads must not keep the JVM alive (a Python test waits for the exit).
        System.exit(0);
    }

    // -- output -----------------------------------------------------------------------------------

    static void emit(String check, Object... keyValues) throws Exception {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("check", check);
        for (int i = 0; i < keyValues.length; i += 2) {
            line.put((String) keyValues[i], keyValues[i + 1]);
        }
        System.out.println(JSON.writeValueAsString(line));
        System.out.flush();
    }

    static Map<String, Long> byPartition(Map<TopicPartition, ?> offsets) {
        Map<String, Long> out = new TreeMap<>();
        offsets.forEach((tp, v) -> out.put(tp.toString(), v == null ? null
                : v instanceof OffsetAndMetadata om ? om.offset()
                : v instanceof ListOffsetsResultInfo info ? info.offset()
                : (Long) v));
        return out;
    }

    // -- clients ----------------------------------------------------------------------------------

    Properties common() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        return p;
    }

    Admin admin() {
        return Admin.create(common());
    }

    /** Java's defaults (idempotent, acks=all) plus whatever the scenario sets. */
    KafkaProducer<String, String> producer(Object... settings) {
        Properties p = common();
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        for (int i = 0; i < settings.length; i += 2) {
            p.put(settings[i], settings[i + 1]);
        }
        return new KafkaProducer<>(p);
    }

    KafkaConsumer<String, String> consumer(Object... settings) {
        Properties p = common();
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        for (int i = 0; i < settings.length; i += 2) {
            p.put(settings[i], settings[i + 1]);
        }
        return new KafkaConsumer<>(p);
    }

    void createTopic(Admin admin, String topic, int partitions, Map<String, String> configs) throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1).configs(configs))).all()
                .get(30, TimeUnit.SECONDS);
    }

    /** n records to the topic, record i with key k-i, a header and CreateTime BASE_TS + i s;
     *  partition i % partitions. Returns each one's offset. */
    static List<Long> send(KafkaProducer<String, String> producer, String topic, int partitions, int from, int n,
                           String valuePrefix) throws Exception {
        List<java.util.concurrent.Future<RecordMetadata>> futures = new ArrayList<>();
        for (int i = from; i < from + n; i++) {
            ProducerRecord<String, String> r = new ProducerRecord<>(topic, i % partitions, BASE_TS + i * 1000L,
                    "k-" + i, valuePrefix + "-" + i + "-" + "the quick brown fox jumps over the lazy dog ".repeat(1 + i % 10));
            r.headers().add("i", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
            futures.add(producer.send(r));
        }
        producer.flush();
        List<Long> offsets = new ArrayList<>();
        for (var f : futures) {
            offsets.add(f.get(30, TimeUnit.SECONDS).offset());
        }
        return offsets;
    }

    /** Poll until n records came (or the deadline passed). */
    static List<ConsumerRecord<String, String>> pollFor(KafkaConsumer<String, String> consumer, int n) {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (out.size() < n && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : consumer.poll(POLL)) {
                out.add(r);
            }
        }
        return out;
    }

    /** Poll until nothing more comes for a second: everything a consumer sees (for counts that
     *  must not grow). */
    static List<ConsumerRecord<String, String>> pollUntilQuiet(KafkaConsumer<String, String> consumer, int atLeast) {
        List<ConsumerRecord<String, String>> out = pollFor(consumer, atLeast);
        long quietUntil = System.currentTimeMillis() + 1000;
        while (System.currentTimeMillis() < quietUntil) {
            ConsumerRecords<String, String> more = consumer.poll(POLL);
            more.forEach(out::add);
            if (!more.isEmpty()) {
                quietUntil = System.currentTimeMillis() + 1000;
            }
        }
        return out;
    }

    static List<String> values(List<ConsumerRecord<String, String>> records) {
        return records.stream().map(r -> r.value().split("-the ")[0]).toList();
    }

    // -- scenarios --------------------------------------------------------------------------------

    /** The default (idempotent) producer with lz4 and zstd, each read back whole. */
    void produce() throws Exception {
        try (Admin admin = admin()) {
            for (String codec : List.of("lz4", "zstd")) {
                String topic = prefix + "-" + codec;
                createTopic(admin, topic, 2, Map.of());
                List<Long> offsets;
                try (KafkaProducer<String, String> producer = producer(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec)) {
                    offsets = send(producer, topic, 2, 0, 40, "v");
                }
                List<Map<String, Object>> read = new ArrayList<>();
                try (KafkaConsumer<String, String> consumer = consumer()) {
                    consumer.assign(List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1)));
                    for (ConsumerRecord<String, String> r : pollFor(consumer, 40)) {
                        Map<String, Object> rec = new LinkedHashMap<>();
                        rec.put("partition", r.partition());
                        rec.put("offset", r.offset());
                        rec.put("key", r.key());
                        rec.put("value", r.value());
                        rec.put("timestamp", r.timestamp() - BASE_TS);
                        List<String> headers = new ArrayList<>();
                        for (Header h : r.headers()) {
                            headers.add(h.key() + "=" + new String(h.value(), StandardCharsets.UTF_8));
                        }
                        rec.put("headers", headers);
                        read.add(rec);
                    }
                }
                // The broker keeps the producer's state: one idempotent producer id per partition.
                Map<String, Object> producers = new TreeMap<>();
                var described = admin.describeProducers(List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1)))
                        .all().get(30, TimeUnit.SECONDS);
                described.forEach((tp, d) -> producers.put(tp.toString(), d.activeProducers().stream()
                        .map(s -> Map.of("epoch", s.producerEpoch(), "last_sequence", s.lastSequence(),
                                "has_id", s.producerId() >= 0))
                        .toList()));
                emit("produce", "codec", codec, "offsets", offsets, "read", read, "producers", producers);
            }
        }
    }

    /** A consumer group with the classic protocol and with group.protocol=consumer: consume,
     *  commit, and a second member of the group resumes from the commit. */
    void groups() throws Exception {
        try (Admin admin = admin()) {
            for (String protocol : List.of("classic", "consumer")) {
                String topic = prefix + "-" + protocol;
                String group = prefix + "-g-" + protocol;
                createTopic(admin, topic, 3, Map.of());
                try (KafkaProducer<String, String> producer = producer()) {
                    send(producer, topic, 3, 0, 30, "v");
                }
                List<ConsumerRecord<String, String>> first;
                Set<TopicPartition> assignment;
                Map<TopicPartition, OffsetAndMetadata> committed;
                try (KafkaConsumer<String, String> consumer = consumer(
                        ConsumerConfig.GROUP_ID_CONFIG, group, ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol)) {
                    consumer.subscribe(List.of(topic));
                    first = pollFor(consumer, 30);
                    assignment = consumer.assignment();
                    consumer.commitSync();
                    committed = consumer.committed(assignment);
                }
                try (KafkaProducer<String, String> producer = producer()) {
                    send(producer, topic, 3, 30, 6, "v");
                }
                List<ConsumerRecord<String, String>> second;
                try (KafkaConsumer<String, String> consumer = consumer(
                        ConsumerConfig.GROUP_ID_CONFIG, group, ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol)) {
                    consumer.subscribe(List.of(topic));
                    second = pollUntilQuiet(consumer, 6);
                }
                emit("group", "protocol", protocol, "first", values(first),
                        "assignment", assignment.stream().map(TopicPartition::toString).sorted().toList(),
                        "committed", byPartition(committed), "second", values(second));
            }
        }
    }

    /** assign, seek, position, seekToBeginning/End, offsetsForTimes, beginning/endOffsets. */
    void seek() throws Exception {
        String topic = prefix + "-seek";
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin admin = admin()) {
            createTopic(admin, topic, 1, Map.of());
        }
        try (KafkaProducer<String, String> producer = producer()) {
            send(producer, topic, 1, 0, 20, "v");
        }
        try (KafkaConsumer<String, String> consumer = consumer()) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long atBeginning = consumer.position(tp);
            consumer.seek(tp, 5);
            long afterSeek = consumer.position(tp);
            List<ConsumerRecord<String, String>> got = pollFor(consumer, 15);
            long afterPoll = consumer.position(tp);
            consumer.seekToEnd(List.of(tp));
            long atEnd = consumer.position(tp);
            consumer.seek(tp, new OffsetAndMetadata(12));
            long afterSeekMeta = consumer.position(tp);
            Map<TopicPartition, OffsetAndTimestamp> times = consumer.offsetsForTimes(Map.of(tp, BASE_TS + 7000));
            Map<TopicPartition, OffsetAndTimestamp> between = consumer.offsetsForTimes(Map.of(tp, BASE_TS + 7500));
            Map<TopicPartition, OffsetAndTimestamp> future = consumer.offsetsForTimes(
                    Map.of(tp, System.currentTimeMillis() + 3_600_000));
            emit("seek", "at_beginning", atBeginning, "after_seek", afterSeek,
                    "first_offset", got.isEmpty() ? null : got.get(0).offset(), "count", got.size(),
                    "after_poll", afterPoll, "at_end", atEnd, "after_seek_metadata", afterSeekMeta,
                    "for_time", times.get(tp).offset(), "for_time_ts", times.get(tp).timestamp() - BASE_TS,
                    "for_between", between.get(tp).offset(), "for_future", future.get(tp),
                    "beginning", consumer.beginningOffsets(List.of(tp)).get(tp),
                    "end", consumer.endOffsets(List.of(tp)).get(tp));
        }
    }

    /** The Admin client: topics, configs, partitions, records, offsets, groups, the cluster. */
    void adminScenario() throws Exception {
        String topic = prefix + "-admin";
        String group = prefix + "-admin-g";
        try (Admin admin = admin()) {
            DescribeClusterResult cluster = admin.describeCluster();
            Collection<Node> nodes = cluster.nodes().get(30, TimeUnit.SECONDS);
            Node controller = cluster.controller().get(30, TimeUnit.SECONDS);
            emit("describe_cluster", "cluster_id", cluster.clusterId().get(30, TimeUnit.SECONDS),
                    "node_ids", nodes.stream().map(Node::id).toList(),
                    "node_ports", nodes.stream().map(Node::port).toList(),
                    "controller_in_nodes", nodes.stream().anyMatch(n -> n.id() == controller.id()));

            createTopic(admin, topic, 3, Map.of("retention.ms", "3600000", "cleanup.policy", "delete"));
            var createAgain = admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all();
            String againError;
            try {
                createAgain.get(30, TimeUnit.SECONDS);
                againError = null;
            } catch (java.util.concurrent.ExecutionException e) {
                againError = e.getCause().getClass().getSimpleName();
            }
            emit("create_topics", "again", againError);

            TopicDescription td = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
            emit("describe_topics", "name", td.name(), "internal", td.isInternal(),
                    "topic_id_set", td.topicId() != null && !td.topicId().toString().equals("AAAAAAAAAAAAAAAAAAAAAA"),
                    "partitions", td.partitions().stream().map(TopicPartitionInfo::partition).toList(),
                    "leaders", td.partitions().stream().map(p -> p.leader().id()).toList(),
                    "replicas", td.partitions().stream().map(p -> p.replicas().size()).toList(),
                    "isr", td.partitions().stream().map(p -> p.isr().size()).toList());

            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            emit("describe_configs", "entries", configEntries(admin, resource, "retention.ms", "cleanup.policy",
                    "segment.bytes"));
            admin.incrementalAlterConfigs(Map.of(resource, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", ""), AlterConfigOp.OpType.DELETE),
                    new AlterConfigOp(new ConfigEntry("segment.ms", "600000"), AlterConfigOp.OpType.SET))))
                    .all().get(30, TimeUnit.SECONDS);
            emit("incremental_alter_configs", "entries", configEntries(admin, resource, "retention.ms",
                    "cleanup.policy", "segment.ms"));

            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all().get(30, TimeUnit.SECONDS);
            TopicDescription grown = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
            emit("create_partitions", "partitions", grown.partitions().size());

            TopicPartition tp0 = new TopicPartition(topic, 0);
            try (KafkaProducer<String, String> producer = producer()) {
                send(producer, topic, 1, 0, 10, "v");
            }
            long low = admin.deleteRecords(Map.of(tp0, RecordsToDelete.beforeOffset(4))).lowWatermarks().get(tp0)
                    .get(30, TimeUnit.SECONDS).lowWatermark();
            emit("delete_records", "low_watermark", low);
            Map<String, Object> offsets = new LinkedHashMap<>();
            for (IsolationLevel isolation : List.of(IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED)) {
                var options = new ListOffsetsOptions(isolation);
                Map<String, OffsetSpec> specs = new LinkedHashMap<>();
                specs.put("earliest", OffsetSpec.earliest());
                specs.put("latest", OffsetSpec.latest());
                specs.put("max_timestamp", OffsetSpec.maxTimestamp());
                specs.put("for_timestamp", OffsetSpec.forTimestamp(BASE_TS + 6000));
                specs.put("earliest_local", OffsetSpec.earliestLocal());
                Map<String, Object> answers = new LinkedHashMap<>();
                for (var spec : specs.entrySet()) {
                    ListOffsetsResultInfo info = admin.listOffsets(Map.of(tp0, spec.getValue()), options).all()
                            .get(30, TimeUnit.SECONDS).get(tp0);
                    answers.put(spec.getKey(), List.of(info.offset(), info.timestamp() < 0 ? info.timestamp()
                            : info.timestamp() - BASE_TS));
                }
                offsets.put(isolation.toString(), answers);
            }
            emit("list_offsets", "answers", offsets);

            // A group with a live member (classic protocol), then empty, its offsets moved by the admin.
            try (KafkaConsumer<String, String> consumer = consumer(ConsumerConfig.GROUP_ID_CONFIG, group)) {
                consumer.subscribe(List.of(topic));
                List<ConsumerRecord<String, String>> got = pollFor(consumer, 6);
                consumer.commitSync();
                Collection<ConsumerGroupListing> listed = admin.listConsumerGroups().all().get(30, TimeUnit.SECONDS);
                emit("list_consumer_groups", "consumed", got.size(), "groups", listed.stream()
                        .filter(g -> g.groupId().equals(group))
                        .map(g -> Map.of("state", g.groupState().map(Object::toString).orElse("?"),
                                "type", g.type().map(Object::toString).orElse("?"),
                                "simple", g.isSimpleConsumerGroup()))
                        .toList());
                emit("describe_consumer_groups", "live", describeGroup(admin, group));
            }
            emit("describe_consumer_groups", "empty", describeGroup(admin, group));
            emit("list_consumer_group_offsets", "offsets", byPartition(
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS)));
            admin.alterConsumerGroupOffsets(group, Map.of(tp0, new OffsetAndMetadata(5, "moved"),
                    new TopicPartition(topic, 1), new OffsetAndMetadata(0))).all().get(30, TimeUnit.SECONDS);
            var altered = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
            emit("alter_consumer_group_offsets", "offsets", byPartition(altered),
                    "metadata", altered.get(tp0).metadata());
            try (KafkaConsumer<String, String> consumer = consumer(ConsumerConfig.GROUP_ID_CONFIG, group)) {
                consumer.subscribe(List.of(topic));
                emit("resume_after_alter", "values", values(pollUntilQuiet(consumer, 5)));
            }
        }
    }

    static Map<String, Object> configEntries(Admin admin, ConfigResource resource, String... names) throws Exception {
        Config config = admin.describeConfigs(List.of(resource)).all().get(30, TimeUnit.SECONDS).get(resource);
        Map<String, Object> out = new LinkedHashMap<>();
        for (String name : names) {
            ConfigEntry e = config.get(name);
            out.put(name, e == null ? null : List.of(String.valueOf(e.value()), e.source().toString(),
                    e.isReadOnly(), e.isSensitive()));
        }
        return out;
    }

    static Map<String, Object> describeGroup(Admin admin, String group) throws Exception {
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get(30, TimeUnit.SECONDS)
                .get(group);
        List<Object> members = new ArrayList<>();
        for (MemberDescription m : d.members()) {
            members.add(Map.of("client_id_set", !m.clientId().isEmpty(), "member_id_set", !m.consumerId().isEmpty(),
                    "assignment", m.assignment().topicPartitions().stream().map(TopicPartition::toString).sorted().toList()));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("state", d.groupState().toString());
        out.put("type", d.type().toString());
        out.put("simple", d.isSimpleConsumerGroup());
        out.put("assignor", d.partitionAssignor());
        out.put("coordinator", d.coordinator() == null ? null : d.coordinator().id());
        out.put("members", members);
        return out;
    }

    /** Consume-transform-produce with sendOffsetsToTransaction: committed, aborted, committed,
     *  seen by read_committed and read_uncommitted consumers; and listOffsets while one is open. */
    void transactions() throws Exception {
        String input = prefix + "-in";
        String output = prefix + "-out";
        String group = prefix + "-txg";
        TopicPartition out0 = new TopicPartition(output, 0);
        try (Admin admin = admin()) {
            createTopic(admin, input, 1, Map.of());
            createTopic(admin, output, 1, Map.of());
            try (KafkaProducer<String, String> producer = producer()) {
                send(producer, input, 1, 0, 10, "in");
            }
            try (KafkaProducer<String, String> producer = producer(ProducerConfig.TRANSACTIONAL_ID_CONFIG, prefix + "-tx");
                 KafkaConsumer<String, String> consumer = consumer(ConsumerConfig.GROUP_ID_CONFIG, group,
                         ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed")) {
                producer.initTransactions();
                consumer.subscribe(List.of(input));
                List<ConsumerRecord<String, String>> in = pollFor(consumer, 10);

                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
                for (ConsumerRecord<String, String> r : in) {
                    producer.send(new ProducerRecord<>(output, 0, r.key(), "committed-" + r.offset()));
                    positions.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(positions, consumer.groupMetadata());
                producer.commitTransaction();

                producer.beginTransaction();
                for (int i = 0; i < 5; i++) {
                    producer.send(new ProducerRecord<>(output, 0, "a-" + i, "aborted-" + i));
                }
                producer.sendOffsetsToTransaction(Map.of(new TopicPartition(input, 0), new OffsetAndMetadata(3)),
                        consumer.groupMetadata());
                // Flushed first: abortTransaction drops batches not yet sent, and the test counts these
                // five records in the log (a loaded CI run aborted before they left the client).
                producer.flush();
                producer.abortTransaction();

                // Open: the last stable offset stays where the open transaction began.
                producer.beginTransaction();
                for (int i = 0; i < 3; i++) {
                    producer.send(new ProducerRecord<>(output, 0, "o-" + i, "open-" + i));
                }
                producer.flush();
                Map<String, Long> latest = new LinkedHashMap<>();
                for (IsolationLevel isolation : List.of(IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED)) {
                    latest.put(isolation.toString(), admin.listOffsets(Map.of(out0, OffsetSpec.latest()),
                            new ListOffsetsOptions(isolation)).all().get(30, TimeUnit.SECONDS).get(out0).offset());
                }
                Map<String, Object> whileOpen = new LinkedHashMap<>();
                try (KafkaConsumer<String, String> reader = consumer(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed")) {
                    reader.assign(List.of(out0));
                    whileOpen.put("read_committed", pollUntilQuiet(reader, 10).stream().map(ConsumerRecord::value).toList());
                    whileOpen.put("end", reader.endOffsets(List.of(out0)).get(out0));
                }
                producer.commitTransaction();
                emit("while_open", "latest", latest, "seen", whileOpen);
            }
            Map<String, Object> seen = new LinkedHashMap<>();
            for (String isolation : List.of("read_committed", "read_uncommitted")) {
                try (KafkaConsumer<String, String> reader = consumer(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation)) {
                    reader.assign(List.of(out0));
                    List<ConsumerRecord<String, String>> got = pollUntilQuiet(reader, 13);
                    seen.put(isolation, Map.of("values", got.stream().map(ConsumerRecord::value).toList(),
                            "offsets", got.stream().map(ConsumerRecord::offset).toList(),
                            "end", reader.endOffsets(List.of(out0)).get(out0)));
                }
            }
            emit("transactions", "seen", seen, "group_offsets", byPartition(
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS)));
        }
    }

    /** createAcls and describeAcls (the broker runs an authorizer that lets everyone in when no ACL
     *  names a resource). */
    void acls() throws Exception {
        String topic = prefix + "-acl";
        try (Admin admin = admin()) {
            List<AclBinding> bindings = List.of(
                    new AclBinding(new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                            new AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)),
                    new AclBinding(new ResourcePattern(ResourceType.TOPIC, prefix + "-", PatternType.PREFIXED),
                            new AccessControlEntry("User:bob", "*", AclOperation.WRITE, AclPermissionType.DENY)),
                    new AclBinding(new ResourcePattern(ResourceType.GROUP, prefix + "-g", PatternType.LITERAL),
                            new AccessControlEntry("User:alice", "127.0.0.1", AclOperation.READ, AclPermissionType.ALLOW)));
            admin.createAcls(bindings).all().get(30, TimeUnit.SECONDS);
            emit("describe_acls", "any", describeAcls(admin, AclBindingFilter.ANY),
                    "topic_literal", describeAcls(admin, new AclBindingFilter(
                            new ResourcePatternFilter(ResourceType.TOPIC, topic, PatternType.LITERAL),
                            AccessControlEntryFilter.ANY)),
                    "topic_match", describeAcls(admin, new AclBindingFilter(
                            new ResourcePatternFilter(ResourceType.TOPIC, topic, PatternType.MATCH),
                            AccessControlEntryFilter.ANY)),
                    "alice", describeAcls(admin, new AclBindingFilter(ResourcePatternFilter.ANY,
                            new AccessControlEntryFilter("User:alice", null, AclOperation.ANY, AclPermissionType.ANY))));

            // The ACLs are in force: a DENY for this client's principal (ANONYMOUS over PLAINTEXT) refuses its writes.
            String denied = prefix + "-denied";
            createTopic(admin, denied, 1, Map.of());
            admin.createAcls(List.of(new AclBinding(new ResourcePattern(ResourceType.TOPIC, denied, PatternType.LITERAL),
                    new AccessControlEntry("User:ANONYMOUS", "*", AclOperation.WRITE, AclPermissionType.DENY))))
                    .all().get(30, TimeUnit.SECONDS);
            String refusal;
            try (KafkaProducer<String, String> producer = producer(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false",
                    ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "10000", ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000")) {
                producer.send(new ProducerRecord<>(denied, "k", "v")).get(30, TimeUnit.SECONDS);
                refusal = null;
            } catch (java.util.concurrent.ExecutionException e) {
                refusal = e.getCause().getClass().getSimpleName();
            }
            emit("acl_enforced", "produce_error", refusal);
        }
    }

    static List<String> describeAcls(Admin admin, AclBindingFilter filter) throws Exception {
        return admin.describeAcls(filter).values().get(30, TimeUnit.SECONDS).stream()
                .map(b -> String.join(" ", b.pattern().resourceType().toString(), b.pattern().name(),
                        b.pattern().patternType().toString(), b.entry().principal(), b.entry().host(),
                        b.entry().operation().toString(), b.entry().permissionType().toString()))
                .sorted().toList();
    }

    // -- SASL/OAUTHBEARER with tokens from files (KIP-768's client side) -----------------------------

    /** One case per entry of the OAUTH_TOKENS environment variable (NAME=file:URL,...): a producer
     *  and a consumer logging in with the token of that file through Kafka's
     *  OAuthBearerLoginCallbackHandler (its FileJwtRetriever), three records produced and read
     *  back, or the error that stopped them. The JVM needs the token URLs in the system property
     *  org.apache.kafka.sasl.oauthbearer.allowed.urls. */
    void oauth() throws Exception {
        for (String entry : System.getenv("OAUTH_TOKENS").split(",")) {
            String name = entry.substring(0, entry.indexOf('='));
            String url = entry.substring(entry.indexOf('=') + 1);
            Object[] login = {"security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "OAUTHBEARER",
                    "sasl.login.callback.handler.class",
                    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
                    "sasl.oauthbearer.token.endpoint.url", url,
                    "sasl.jaas.config", "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"};
            String topic = prefix + "-" + name;
            try (KafkaProducer<String, String> producer = producer(with(login, ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000"))) {
                List<Long> offsets = send(producer, topic, 1, 0, 3, "v");
                List<String> read = new ArrayList<>();
                try (KafkaConsumer<String, String> consumer = consumer(login)) {
                    consumer.assign(List.of(new TopicPartition(topic, 0)));
                    for (ConsumerRecord<String, String> r : pollFor(consumer, 3)) {
                        read.add(r.key());
                    }
                }
                emit("oauth", "case", name, "offsets", offsets, "read", read);
            } catch (Exception e) {
                Throwable cause = e;
                while (cause instanceof ExecutionException && cause.getCause() != null) {
                    cause = cause.getCause();
                }
                emit("oauth", "case", name, "error", cause.getClass().getSimpleName(), "message", cause.getMessage());
            }
        }
    }

    static Object[] with(Object[] settings, Object... more) {
        Object[] all = java.util.Arrays.copyOf(settings, settings.length + more.length);
        System.arraycopy(more, 0, all, settings.length, more.length);
        return all;
    }
}
