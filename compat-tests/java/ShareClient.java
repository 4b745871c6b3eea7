// Share groups (KIP-932) through Kafka's own Java client (kafka-clients 4.4): KafkaShareConsumer, as
// compat-tests/test_share_groups.py runs it, the same on Samsa and on Apache Kafka:
//
//     java -cp $HOME/.cache/samsa/kafka4/*:BUILD ShareClient SCENARIO BOOTSTRAP PREFIX [ARGS]
//
// basics PREFIX                   implicit and explicit acknowledgement (ACCEPT, RELEASE, REJECT),
//                                 RELEASE up to the delivery count limit, three consumers of one
//                                 partition, read_committed over an aborted transaction: one JVM
// hold PREFIX TOPIC GROUP N       acquires N records without acknowledging them, says so, and waits
//                                 to be killed (kill -9)
// release-each PREFIX TOPIC GROUP N
//                                 releases every record it is given until N came, each poll apart
// drain PREFIX TOPIC GROUP N UNTIL
//                                 produces N records new-0..new-N-1, then consumes (implicit
//                                 acknowledgement) until it has them all and the clock has passed
//                                 UNTIL (epoch ms): everything it was given
//
// Each prints JSON lines {"check": NAME, ...} on stdout (logs go to stderr). A scenario's topics and
// groups are named from PREFIX. Where a check must show that nothing else comes, the consumer reads
// until a record produced after everything else (a sentinel): a share partition hands out its
// available records lowest offset first, so whatever was still to come would have come before it.

import com.fasterxml.jackson.databind.ObjectMapper;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Predicate;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class ShareClient {
    static final ObjectMapper JSON = new ObjectMapper();
    static final Duration POLL = Duration.ofMillis(200);
    static final long DEADLINE_MS = 60_000;
    static final String SENTINEL = "end";

    final String bootstrap;
    final String prefix;

    ShareClient(String bootstrap, String prefix) {
        this.bootstrap = bootstrap;
        this.prefix = prefix;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: ShareClient basics|hold|release-each|drain BOOTSTRAP PREFIX [ARGS]");
            System.exit(2);
        }
        ShareClient c = new ShareClient(args[1], args[2]);
        switch (args[0]) {
            case "basics" -> c.basics();
            case "hold" -> c.hold(args[3], args[4], Integer.parseInt(args[5]));
            case "release-each" -> c.releaseEach(args[3], args[4], Integer.parseInt(args[5]));
            case "drain" -> c.drain(args[3], args[4], Integer.parseInt(args[5]), Long.parseLong(args[6]));
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

    static int deliveryCount(ConsumerRecord<String, String> r) {
        return r.deliveryCount().map(Short::intValue).orElse(-1);
    }

    /** "value:deliveryCount", what most checks compare. */
    static String delivery(ConsumerRecord<String, String> r) {
        return r.value() + ":" + deliveryCount(r);
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

    KafkaProducer<String, String> producer(Object... settings) {
        Properties p = common();
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("linger.ms", "5");
        for (int i = 0; i < settings.length; i += 2) {
            p.put(settings[i], settings[i + 1]);
        }
        return new KafkaProducer<>(p);
    }

    /** A share consumer of the group, subscribed to the topic; mode is implicit or explicit. */
    KafkaShareConsumer<String, String> consumer(String group, String topic, String mode, Object... settings) {
        Properties p = common();
        p.put("group.id", group);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("share.acknowledgement.mode", mode);
        for (int i = 0; i < settings.length; i += 2) {
            p.put(settings[i], settings[i + 1]);
        }
        KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p);
        c.subscribe(List.of(topic));
        return c;
    }

    static void createTopic(Admin admin, String topic, int partitions) throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(30, TimeUnit.SECONDS);
    }

    /** Group configs on the GROUP config resource (IncrementalAlterConfigs, resource type 32). */
    static void setGroupConfigs(Admin admin, String group, String... keyValues) throws Exception {
        List<AlterConfigOp> ops = new ArrayList<>();
        for (int i = 0; i < keyValues.length; i += 2) {
            ops.add(new AlterConfigOp(new ConfigEntry(keyValues[i], keyValues[i + 1]), AlterConfigOp.OpType.SET));
        }
        admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, group), ops)).all()
                .get(30, TimeUnit.SECONDS);
    }

    /** A topic of one partition and a group that starts at its beginning (share.auto.offset.reset
     *  is latest by default), plus whatever group configs the check sets. */
    void prepare(Admin admin, String topic, String group, String... groupConfigs) throws Exception {
        createTopic(admin, topic, 1);
        List<String> configs = new ArrayList<>(List.of("share.auto.offset.reset", "earliest"));
        configs.addAll(List.of(groupConfigs));
        setGroupConfigs(admin, group, configs.toArray(new String[0]));
    }

    static void send(KafkaProducer<String, String> producer, String topic, List<String> values) throws Exception {
        List<java.util.concurrent.Future<?>> sent = new ArrayList<>();
        for (String v : values) {
            sent.add(producer.send(new ProducerRecord<>(topic, 0, null, v)));
        }
        producer.flush();
        for (var f : sent) {
            f.get(30, TimeUnit.SECONDS);
        }
    }

    static List<String> values(String prefix, int n) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            out.add(prefix + "-" + i);
        }
        return out;
    }

    interface OnRecord {
        /** The acknowledgement for a record in explicit mode; null in implicit mode. */
        AcknowledgeType on(ConsumerRecord<String, String> r);
    }

    /** Poll until done(deliveries so far) says so (or the deadline passed), acknowledging as
     *  onRecord says; every delivery as "value:deliveryCount", in order. */
    static List<String> pollUntil(KafkaShareConsumer<String, String> c, OnRecord onRecord,
                                  Predicate<List<String>> done) {
        List<String> seen = new ArrayList<>();
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (!done.test(seen) && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : c.poll(POLL)) {
                seen.add(delivery(r));
                AcknowledgeType ack = onRecord.on(r);
                if (ack != null) {
                    c.acknowledge(r, ack);
                }
            }
        }
        return seen;
    }

    static boolean sawSentinel(List<String> seen) {
        return seen.stream().anyMatch(d -> d.startsWith(SENTINEL + ":"));
    }

    // -- basics -----------------------------------------------------------------------------------

    void basics() throws Exception {
        try (Admin admin = admin(); KafkaProducer<String, String> producer = producer()) {
            implicitAcknowledgement(admin, producer);
            explicitAcknowledgement(admin, producer);
            releaseToTheLimit(admin, producer);
            severalConsumersOnePartition(admin, producer);
            readCommitted(admin);
        }
    }

    /** Implicit acknowledgement: a poll acknowledges (ACCEPT) what the one before gave; commitSync
     *  and close the last. The group's next consumer gets none of it again. */
    void implicitAcknowledgement(Admin admin, KafkaProducer<String, String> producer) throws Exception {
        String topic = prefix + "-implicit", group = prefix + "-implicit";
        prepare(admin, topic, group);
        send(producer, topic, values("v", 20));
        List<String> first;
        long lockTimeoutMs;
        try (KafkaShareConsumer<String, String> c = consumer(group, topic, "implicit")) {
            first = pollUntil(c, r -> null, seen -> seen.size() >= 20);
            lockTimeoutMs = c.acquisitionLockTimeoutMs().map(Integer::longValue).orElse(-1L);
            c.commitSync();
        }
        send(producer, topic, List.of(SENTINEL));
        List<String> after;
        try (KafkaShareConsumer<String, String> c = consumer(group, topic, "implicit")) {
            after = pollUntil(c, r -> null, ShareClient::sawSentinel);
            c.commitSync();
        }
        emit("implicit", "first", first, "after_close", after, "acquisition_lock_timeout_ms", lockTimeoutMs);
    }

    /** Explicit acknowledgement of each record: v-i with i % 3 == 0 ACCEPT, 1 RELEASE (delivered
     *  again with its delivery count raised, then accepted), 2 REJECT (never again). */
    void explicitAcknowledgement(Admin admin, KafkaProducer<String, String> producer) throws Exception {
        String topic = prefix + "-explicit", group = prefix + "-explicit";
        prepare(admin, topic, group);
        send(producer, topic, values("v", 12));
        List<String> events = new ArrayList<>();
        try (KafkaShareConsumer<String, String> c = consumer(group, topic, "explicit")) {
            Set<String> released = ConcurrentHashMap.newKeySet();
            Set<String> redelivered = ConcurrentHashMap.newKeySet();
            Set<String> first = ConcurrentHashMap.newKeySet();
            OnRecord rule = r -> {
                AcknowledgeType ack;
                if (r.value().equals(SENTINEL) || deliveryCount(r) > 1) {
                    ack = AcknowledgeType.ACCEPT;
                    redelivered.add(r.value());
                } else {
                    int i = Integer.parseInt(r.value().substring(2));
                    ack = i % 3 == 0 ? AcknowledgeType.ACCEPT : i % 3 == 1 ? AcknowledgeType.RELEASE : AcknowledgeType.REJECT;
                    first.add(r.value());
                    if (ack == AcknowledgeType.RELEASE) {
                        released.add(r.value());
                    }
                }
                events.add(delivery(r) + ":" + ack);
                return ack;
            };
            pollUntil(c, rule, seen -> first.size() == 12 && redelivered.containsAll(released));
            c.commitSync();
            send(producer, topic, List.of(SENTINEL));
            List<String> tail = pollUntil(c, r -> AcknowledgeType.ACCEPT, ShareClient::sawSentinel);
            c.commitSync();
            Collections.sort(events);
            emit("explicit", "events", events, "until_sentinel", tail);
        }
    }

    /** share.delivery.count.limit 2: a record released at every delivery is delivered twice, then
     *  archived (never delivered again). */
    void releaseToTheLimit(Admin admin, KafkaProducer<String, String> producer) throws Exception {
        String topic = prefix + "-limit", group = prefix + "-limit";
        prepare(admin, topic, group, "share.delivery.count.limit", "2");
        send(producer, topic, values("v", 3));
        List<String> events = new ArrayList<>();
        try (KafkaShareConsumer<String, String> c = consumer(group, topic, "explicit")) {
            Set<String> atLimit = ConcurrentHashMap.newKeySet();
            pollUntil(c, r -> {
                events.add(delivery(r));
                if (deliveryCount(r) >= 2) {
                    atLimit.add(r.value());
                }
                return AcknowledgeType.RELEASE;
            }, seen -> atLimit.size() == 3);
            c.commitSync();
            send(producer, topic, List.of(SENTINEL));
            List<String> tail = pollUntil(c, r -> r.value().equals(SENTINEL) ? AcknowledgeType.ACCEPT
                    : AcknowledgeType.RELEASE, ShareClient::sawSentinel);
            c.commitSync();
            Collections.sort(events);
            emit("release_to_limit", "events", events, "until_sentinel", tail);
        }
    }

    /** Three consumers of one group share one partition: once the group's description shows the
     *  partition assigned to all three, 300 records produced in 30 batches while they poll (at most
     *  10 records a poll); each one's deliveries. */
    void severalConsumersOnePartition(Admin admin, KafkaProducer<String, String> producer) throws Exception {
        String topic = prefix + "-several", group = prefix + "-several";
        prepare(admin, topic, group);
        int consumers = 3, total = 300;
        Set<String> union = ConcurrentHashMap.newKeySet();
        AtomicBoolean stop = new AtomicBoolean();
        CountDownLatch polling = new CountDownLatch(consumers);
        List<List<String>> got = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        for (int n = 0; n < consumers; n++) {
            List<String> mine = Collections.synchronizedList(new ArrayList<>());
            got.add(mine);
            Thread t = new Thread(() -> {
                try (KafkaShareConsumer<String, String> c = consumer(group, topic, "implicit", "max.poll.records", "10")) {
                    long deadline = System.currentTimeMillis() + DEADLINE_MS;
                    boolean first = true;
                    while (!stop.get() && System.currentTimeMillis() < deadline) {
                        for (ConsumerRecord<String, String> r : c.poll(POLL)) {
                            mine.add(delivery(r));
                            union.add(r.value());
                        }
                        if (first) {
                            polling.countDown();
                            first = false;
                        }
                        if (union.size() >= total) {
                            stop.set(true);
                        }
                    }
                    c.commitSync();
                }
            });
            t.start();
            threads.add(t);
        }
        polling.await(DEADLINE_MS, TimeUnit.MILLISECONDS);
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (assignedMembers(admin, group, topic) < consumers && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);  // ShareGroupDescribe again: membership has no event an admin can await
        }
        for (int b = 0; b < total / 10; b++) {
            send(producer, topic, values("v", total).subList(b * 10, b * 10 + 10));
        }
        for (Thread t : threads) {
            t.join(DEADLINE_MS * 2);
        }
        emit("several_consumers", "consumers", got);
    }

    /** How many members of the share group have the topic's partition 0 assigned (ShareGroupDescribe). */
    static int assignedMembers(Admin admin, String group, String topic) throws Exception {
        ShareGroupDescription d = admin.describeShareGroups(List.of(group)).describedGroups().get(group)
                .get(30, TimeUnit.SECONDS);
        return (int) d.members().stream()
                .filter(m -> m.assignment().topicPartitions().contains(new TopicPartition(topic, 0))).count();
    }

    /** share.isolation.level read_committed: a transaction's records once it commits, an aborted
     *  one's never; read_uncommitted (the default) gets both. */
    void readCommitted(Admin admin) throws Exception {
        String topic = prefix + "-txn";
        String committedGroup = prefix + "-read-committed", uncommittedGroup = prefix + "-read-uncommitted";
        createTopic(admin, topic, 1);
        setGroupConfigs(admin, committedGroup, "share.auto.offset.reset", "earliest",
                "share.isolation.level", "read_committed");
        setGroupConfigs(admin, uncommittedGroup, "share.auto.offset.reset", "earliest");
        try (KafkaProducer<String, String> p = producer("transactional.id", prefix + "-txn")) {
            p.initTransactions();
            for (String[] txn : new String[][]{{"committed-a", "commit"}, {"aborted", "abort"}, {"committed-b", "commit"},
                                                {SENTINEL, "commit"}}) {
                p.beginTransaction();
                for (String v : txn[0].equals(SENTINEL) ? List.of(SENTINEL) : values(txn[0], 5)) {
                    p.send(new ProducerRecord<>(topic, 0, null, v));
                }
                if (txn[1].equals("commit")) {
                    p.commitTransaction();
                } else {
                    p.flush();
                    p.abortTransaction();
                }
            }
        }
        Map<String, List<String>> seen = new TreeMap<>();
        for (String group : List.of(committedGroup, uncommittedGroup)) {
            try (KafkaShareConsumer<String, String> c = consumer(group, topic, "implicit")) {
                List<String> got = pollUntil(c, r -> null, ShareClient::sawSentinel);
                c.commitSync();
                seen.put(group.equals(committedGroup) ? "read_committed" : "read_uncommitted", got);
            }
        }
        emit("read_committed", "seen", seen);
    }

    // -- a consumer killed while it holds records -------------------------------------------------

    /** Acquire n records of the topic and never acknowledge them: say which, then wait for kill -9.
     *  In explicit mode a poll that gave records must see them acknowledged before the next: the
     *  records come in one poll (they were produced in one batch and are released or expire
     *  together), else what the first poll gave is all this says. */
    void hold(String topic, String group, int n) throws Exception {
        KafkaShareConsumer<String, String> c = consumer(group, topic, "explicit");
        List<String> held = new ArrayList<>();
        long acquiredAt = 0;
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (held.isEmpty() && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : c.poll(POLL)) {
                held.add(delivery(r));
            }
        }
        acquiredAt = System.currentTimeMillis();
        emit("held", "records", held, "acquired_at_ms", acquiredAt,
             "acquisition_lock_timeout_ms", c.acquisitionLockTimeoutMs().map(Integer::longValue).orElse(-1L));
        new CountDownLatch(1).await();  // until killed
    }

    /** Release every record the group gives until n records came, each poll's deliveries apart:
     *  at a record's last delivery attempt Kafka hands it out alone (SharePartition's throttling). */
    void releaseEach(String topic, String group, int n) throws Exception {
        try (KafkaShareConsumer<String, String> c = consumer(group, topic, "explicit")) {
            List<List<String>> polls = new ArrayList<>();
            Set<String> seen = new java.util.HashSet<>();
            long firstAt = 0;
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (seen.size() < n && System.currentTimeMillis() < deadline) {
                List<String> got = new ArrayList<>();
                for (ConsumerRecord<String, String> r : c.poll(POLL)) {
                    got.add(delivery(r));
                    seen.add(r.value());
                    c.acknowledge(r, AcknowledgeType.RELEASE);
                }
                if (!got.isEmpty()) {
                    polls.add(got);
                    firstAt = firstAt == 0 ? System.currentTimeMillis() : firstAt;
                }
            }
            c.commitSync();
            emit("released", "polls", polls, "first_at_ms", firstAt);
        }
    }

    /** n new records, then everything the group gives until they all came and the clock passed until. */
    void drain(String topic, String group, int n, long until) throws Exception {
        try (KafkaProducer<String, String> p = producer()) {
            send(p, topic, values("new", n));
        }
        try (KafkaShareConsumer<String, String> c = consumer(group, topic, "implicit")) {
            List<String> got = pollUntil(c, r -> null, seen -> seen.stream().filter(d -> d.startsWith("new-")).count() >= n
                    && System.currentTimeMillis() > until);
            c.commitSync();
            emit("drained", "records", got);
        }
    }
}
