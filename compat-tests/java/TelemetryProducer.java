import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A Java producer with client telemetry on (KIP-714, the default): it sends a record every 100 ms
 * for SECONDS seconds, so it stays connected while the broker's push interval passes, then closes
 * (its last push terminating). Used by compat-tests/test_client_telemetry.py.
 */
public class TelemetryProducer {
    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: TelemetryProducer BOOTSTRAP TOPIC CLIENT_ID SECONDS");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, args[2]);
        props.put(ProducerConfig.ENABLE_METRICS_PUSH_CONFIG, true);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        long end = System.currentTimeMillis() + Long.parseLong(args[3]) * 1000;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int i = 0; System.currentTimeMillis() < end; i++) {
                producer.send(new ProducerRecord<>(args[1], "k-" + i, "v-" + i)).get();
                Thread.sleep(100);
            }
        }
        System.out.println("done");
        System.exit(0);
    }
}
