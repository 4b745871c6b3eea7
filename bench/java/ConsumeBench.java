// bench/share.py's client: Kafka's Java client (kafka-clients 4.4), one JVM for a whole bench run
// (its JIT warmed once, for every broker alike), taking commands on stdin and answering with JSON
// lines on stdout (the client's logs go to stderr):
//
//     consume MODE BOOTSTRAP TOPIC GROUP RECORDS
//         classic         KafkaConsumer, group.protocol=classic, auto.offset.reset=earliest
//         share           KafkaShareConsumer, implicit acknowledgement (each poll accepts the last)
//         share-explicit  KafkaShareConsumer, acknowledge(record, ACCEPT) for every record and
//                         commitSync() after every poll (a ShareAcknowledge round trip per batch)
//         A share group is first given share.auto.offset.reset=earliest (its default, latest, would
//         skip the records already there). Answers {"event":"first"} once a poll returned records,
//         {"event":"done", ...} once RECORDS have arrived and the last offset commit or
//         acknowledgement returned, {"event":"closed", "seconds": S} once the consumer has left its group
//         (S: the seconds close() took).
//     quit
//
// "done" counts what arrived after the first poll's records and the seconds since: the group's join
// and the first fetch are not timed. bench/share.py reads the broker's CPU at "first" and at "done".

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class ConsumeBench {
    static final Duration POLL = Duration.ofMillis(100);
    // No record for this long: the broker stopped delivering, and the run is reported as failed.
    static final long STALL_MS = 30_000;

    /** What one run saw; `first*` are the first non-empty poll's, not timed. */
    static final class Tally {
        long records, bytes, firstRecords, firstBytes, polls, redelivered, failedAcks;
        long firstNanos, lastRecordNanos;
        final long startNanos = System.nanoTime();
        String error;

        void add(ConsumerRecords<byte[], byte[]> batch) {
            polls++;
            if (batch.isEmpty()) {
                return;
            }
            long now = System.nanoTime();
            for (ConsumerRecord<byte[], byte[]> record : batch) {
                records++;
                bytes += (record.key() == null ? 0 : record.key().length) + (record.value() == null ? 0 : record.value().length);
                if (record.deliveryCount().map(n -> n > 1).orElse(false)) {
                    redelivered++;
                }
            }
            lastRecordNanos = now;
            if (firstNanos == 0) {
                firstNanos = now;
                firstRecords = records;
                firstBytes = bytes;
                emit("{\"event\":\"first\"}");
            }
        }

        boolean stalled() {
            long since = lastRecordNanos == 0 ? startNanos : lastRecordNanos;
            return (System.nanoTime() - since) / 1_000_000 > STALL_MS;
        }

        String done() {
            double seconds = (System.nanoTime() - firstNanos) / 1e9;
            return String.format(
                "{\"event\":\"done\",\"records\":%d,\"bytes\":%d,\"timed_records\":%d,\"timed_bytes\":%d,"
                    + "\"seconds\":%.6f,\"polls\":%d,\"redelivered\":%d,\"failed_acks\":%d,\"error\":%s}",
                records, bytes, records - firstRecords, bytes - firstBytes, firstNanos == 0 ? 0.0 : seconds,
                polls, redelivered, failedAcks, error == null ? "null" : quote(error));
        }
    }

    static void closed(long closing) {
        emit(String.format("{\"event\":\"closed\",\"seconds\":%.3f}", (System.nanoTime() - closing) / 1e9));
    }

    static void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ") + "\"";
    }

    static Properties common(String bootstrap, String group) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        return p;
    }

    static void classic(String bootstrap, String topic, String group, long wanted) {
        Properties p = common(bootstrap, group);
        p.put("group.protocol", "classic");
        p.put("auto.offset.reset", "earliest");
        Tally tally = new Tally();
        long closing;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(List.of(topic));
            while (tally.records < wanted && !tally.stalled()) {
                tally.add(consumer.poll(POLL));
            }
            if (tally.records >= wanted) {
                consumer.commitSync();
            } else {
                tally.error = "stalled at " + tally.records + " of " + wanted + " records";
            }
            emit(tally.done());
            closing = System.nanoTime();
        }
        closed(closing);
    }

    static void earliestForShareGroup(String bootstrap, String group) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(p)) {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
            AlterConfigOp earliest = new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"),
                                                       AlterConfigOp.OpType.SET);
            admin.incrementalAlterConfigs(Map.of(resource, List.of(earliest))).all().get();
        }
    }

    static void share(String bootstrap, String topic, String group, long wanted, boolean explicit) throws Exception {
        earliestForShareGroup(bootstrap, group);
        Properties p = common(bootstrap, group);
        p.put("share.acknowledgement.mode", explicit ? "explicit" : "implicit");
        Tally tally = new Tally();
        long closing;
        try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(p)) {
            consumer.subscribe(List.of(topic));
            while (tally.records < wanted && !tally.stalled()) {
                ConsumerRecords<byte[], byte[]> batch = consumer.poll(POLL);
                tally.add(batch);
                if (explicit && !batch.isEmpty()) {
                    for (ConsumerRecord<byte[], byte[]> record : batch) {
                        consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                    }
                    tally.failedAcks += failures(consumer.commitSync());
                }
            }
            if (tally.records >= wanted) {
                tally.failedAcks += failures(consumer.commitSync());  // implicit: accepts the last poll's
            } else {
                tally.error = "stalled at " + tally.records + " of " + wanted + " records";
            }
            emit(tally.done());
            closing = System.nanoTime();
        }
        closed(closing);
    }

    static long failures(Map<TopicIdPartition, Optional<KafkaException>> results) {
        return results.values().stream().filter(Optional::isPresent).count();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        emit("{\"event\":\"ready\"}");
        for (String line; (line = in.readLine()) != null; ) {
            String[] words = line.trim().split("\\s+");
            if (words[0].equals("quit")) {
                return;
            }
            try {
                if (!words[0].equals("consume") || words.length != 6) {
                    throw new IllegalArgumentException("usage: consume MODE BOOTSTRAP TOPIC GROUP RECORDS");
                }
                String mode = words[1], bootstrap = words[2], topic = words[3], group = words[4];
                long wanted = Long.parseLong(words[5]);
                switch (mode) {
                    case "classic" -> classic(bootstrap, topic, group, wanted);
                    case "share" -> share(bootstrap, topic, group, wanted, false);
                    case "share-explicit" -> share(bootstrap, topic, group, wanted, true);
                    default -> throw new IllegalArgumentException("no mode " + mode);
                }
            } catch (Exception e) {
                emit("{\"event\":\"failed\",\"error\":" + quote(e.toString()) + "}");
            }
        }
    }
}
