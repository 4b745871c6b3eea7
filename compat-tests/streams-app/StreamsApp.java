import java.time.Duration;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A stateful Kafka Streams application under exactly_once_v2, on the group protocol it is given
 * (classic, or streams: KIP-1071), for test_kafka_streams.py: it counts the values of its input topic (a
 * repartition topic, a state store and its changelog topic) into its output topic, printing its
 * state changes ("STATE from -> to") until its standard input closes.
 * Arguments: bootstrap, application id, state dir, input topic, output topic, group protocol
 * (classic or streams)[, group instance id (static membership: closing leaves the group for a
 * while, with epoch -2)].
 */
public class StreamsApp {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[2]);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, args[5]);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        if (args.length > 6) {
            p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, args[6]);
        }
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(args[3]).groupBy((k, v) -> v).count().toStream()
            .mapValues(Object::toString).to(args[4], Produced.with(Serdes.String(), Serdes.String()));
        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + before + " -> " + now);
            System.out.flush();
        });
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        streams.start();
        while (System.in.read() != -1) { }
        streams.close(Duration.ofSeconds(20));
    }
}
