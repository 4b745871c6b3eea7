// A consume-transform-produce loop with Kafka's own Java client (kafka-clients 4.4), which uses
// transaction version 2 (KIP-890 part 2) when the broker finalizes transaction.version 2: no
// AddPartitionsToTxn, an epoch bump at every commit. One JVM does many transactions:
//
//     java -cp BUILD:$HOME/.cache/samsa/kafka4/* TxnV2Transform BOOTSTRAP SOURCE SINK GROUP TRANSACTIONAL_ID PAUSE_MS
//
// It reads SOURCE (read_committed, its partitions assigned, positions from GROUP's committed
// offsets), writes each record's value prefixed "t:" to the same partition of SINK, and commits the
// positions with the transaction; it goes on through a broker's restart (an abortable error aborts
// and rewinds to the committed offsets; a fatal one, or a timeout, starts a new producer, which
// fences the old one). Each commit prints {"check": "commit", "records": N}; once every record of
// SOURCE is committed it prints {"check": "done", ...} and exits. compat-tests/test_transactions_v2.py
// kills it with kill -9 and starts it again.

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.stream.Collectors;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnV2Transform {
    final String bootstrap, source, sink, group, transactionalId;
    final long pauseMs;
    KafkaProducer<String, String> producer;
    int producers = 0, commits = 0, aborts = 0;

    TxnV2Transform(String[] args) {
        bootstrap = args[0];
        source = args[1];
        sink = args[2];
        group = args[3];
        transactionalId = args[4];
        pauseMs = Long.parseLong(args[5]);
    }

    static void emit(String check, Object... keyValues) {
        StringBuilder line = new StringBuilder("{\"check\": \"").append(check).append('"');
        for (int i = 0; i < keyValues.length; i += 2) {
            line.append(", \"").append(keyValues[i]).append("\": ");
            Object v = keyValues[i + 1];
            line.append(v instanceof String ? "\"" + v + "\"" : String.valueOf(v));
        }
        System.out.println(line.append('}'));
        System.out.flush();
    }

    KafkaProducer<String, String> newProducer() {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "20000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        while (true) {
            KafkaProducer<String, String> made = new KafkaProducer<>(p);
            try {
                made.initTransactions();
                producers++;
                return made;
            } catch (KafkaException e) {  // the broker is restarting: try again
                emit("init_failed", "error", e.getClass().getSimpleName());
                made.close(Duration.ZERO);
            }
        }
    }

    KafkaConsumer<String, String> newConsumer() {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "25");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    /** Back to the offsets last committed with a transaction (the start when there are none). */
    static void rewind(KafkaConsumer<String, String> consumer, Set<TopicPartition> partitions) {
        while (true) {
            try {
                Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(partitions);
                for (TopicPartition tp : partitions) {
                    OffsetAndMetadata o = committed.get(tp);
                    consumer.seek(tp, o == null ? 0 : o.offset());
                }
                return;
            } catch (KafkaException e) {
                emit("rewind_failed", "error", e.getClass().getSimpleName());
            }
        }
    }

    void run() throws Exception {
        try (KafkaConsumer<String, String> consumer = newConsumer()) {
            Set<TopicPartition> partitions = consumer.partitionsFor(source, Duration.ofSeconds(60)).stream()
                .map(info -> new TopicPartition(source, info.partition())).collect(Collectors.toSet());
            consumer.assign(partitions);
            rewind(consumer, partitions);
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions, Duration.ofSeconds(60));
            producer = newProducer();
            while (true) {
                boolean caughtUp = partitions.stream().allMatch(tp -> consumer.position(tp) >= end.get(tp));
                if (caughtUp) {
                    emit("done", "commits", commits, "aborts", aborts, "producers", producers);
                    producer.close(Duration.ofSeconds(5));
                    return;
                }
                ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(500));
                if (batch.isEmpty()) {
                    continue;
                }
                Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
                try {
                    producer.beginTransaction();
                    for (ConsumerRecord<String, String> r : batch) {
                        producer.send(new ProducerRecord<>(sink, r.partition(), r.key(), "t:" + r.value()));
                        positions.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                    producer.sendOffsetsToTransaction(positions, consumer.groupMetadata());
                    producer.commitTransaction();
                    commits++;
                    emit("commit", "records", batch.count());
                } catch (ProducerFencedException | OutOfOrderSequenceException | AuthorizationException
                         | UnsupportedVersionException | InvalidProducerEpochException | TimeoutException e) {
                    // Fatal, or not known to have ended: a new producer fences this one and aborts
                    // what it left open.
                    emit("new_producer", "error", e.getClass().getSimpleName());
                    producer.close(Duration.ZERO);
                    producer = newProducer();
                    rewind(consumer, partitions);
                } catch (KafkaException e) {
                    emit("abort", "error", e.getClass().getSimpleName());
                    try {
                        producer.abortTransaction();
                        aborts++;
                    } catch (KafkaException e2) {
                        producer.close(Duration.ZERO);
                        producer = newProducer();
                    }
                    rewind(consumer, partitions);
                }
                if (pauseMs > 0) {
                    Thread.sleep(pauseMs);
                }
            }
        }
    }

    public static void main(String[] args) throws Exception {
        new TxnV2Transform(args).run();
    }
}
