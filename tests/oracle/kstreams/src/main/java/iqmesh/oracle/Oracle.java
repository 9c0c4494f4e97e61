package iqmesh.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.File;
import java.io.InputStream;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.ValueAndTimestamp;
import org.apache.kafka.streams.test.TestRecord;

/**
 * Kafka Streams as the oracle of iqmesh's differential tests (tests/oracle): reads a JSON batch of
 * scenarios (a template name, its parameters, the input records), runs each through Kafka Streams'
 * own TopologyTestDriver and writes, after every input record, what each output topic received
 * and what the queried stores hold. One JVM start for the whole batch.
 *
 * <p>Input: {"scenarios": [{"id", "template", "params": {...}, "keys": [...], "inputs": [{"topic",
 * "key", "value", "ts"}]}]} on stdin or in the file named by the first argument. Output (stdout):
 * {"results": [{"id", "steps": [{"outputs": {topic: [[key, value, ts]...]}, "stores": {name: rows}}],
 * "error": null | "message"}]}.
 */
public final class Oracle {
    private static final ObjectMapper JSON = new ObjectMapper();

    private Oracle() {
    }

    public static void main(String[] args) throws Exception {
        JsonNode batch;
        if (args.length > 0) {
            batch = JSON.readTree(new File(args[0]));
        } else {
            try (InputStream in = System.in) {
                batch = JSON.readTree(in);
            }
        }
        ObjectNode out = JSON.createObjectNode();
        ArrayNode results = out.putArray("results");
        for (JsonNode scenario : batch.get("scenarios")) {
            results.add(run(scenario));
        }
        JSON.writeValue(System.out, out);
        System.out.flush();
    }

    private static final File STATE_DIR = stateDir();

    private static File stateDir() {
        try {
            File dir = java.nio.file.Files.createTempDirectory("iqmesh-oracle-").toFile();
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                try (var paths = java.nio.file.Files.walk(dir.toPath())) {
                    paths.sorted(java.util.Comparator.reverseOrder()).map(java.nio.file.Path::toFile).forEach(File::delete);
                } catch (java.io.IOException ignored) {
                    // a leftover temporary directory is harmless
                }
            }));
            return dir;
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    static ObjectNode run(JsonNode scenario) {
        ObjectNode result = JSON.createObjectNode();
        result.set("id", scenario.get("id"));
        ArrayNode steps = result.putArray("steps");
        result.putNull("error");
        Templates.Built built;
        try {
            built = Templates.build(scenario.get("template").asText(), scenario.get("params"));
        } catch (RuntimeException e) {
            result.put("error", "build: " + describe(e));
            return result;
        }
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "oracle");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "dummy:1234");
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        // this JVM's own state directory: oracles running at once (other runs, other checkouts on
        // the machine) must not share /tmp/kafka-streams/oracle (DirectoryNotEmptyException)
        props.put(StreamsConfig.STATE_DIR_CONFIG, STATE_DIR.getPath());
        List<String> keys = new ArrayList<>();
        scenario.get("keys").forEach(k -> keys.add(k.asText()));
        try (TopologyTestDriver driver = new TopologyTestDriver(built.topology(), props, Instant.ofEpochMilli(0))) {
            Map<String, TestOutputTopic<String, ?>> outputs = new java.util.TreeMap<>();
            for (Map.Entry<String, Deserializer<?>> e : built.outputs().entrySet()) {
                outputs.put(e.getKey(), driver.createOutputTopic(e.getKey(), Serdes.String().deserializer(),
                        e.getValue()));
            }
            Map<String, TestInputTopic<String, String>> inputs = new java.util.HashMap<>();
            for (JsonNode rec : scenario.get("inputs")) {
                String topic = rec.get("topic").asText();
                TestInputTopic<String, String> in = inputs.computeIfAbsent(topic, t -> driver.createInputTopic(
                        t, new StringSerializer(), new StringSerializer()));
                String key = rec.get("key").isNull() ? null : rec.get("key").asText();
                String value = rec.get("value").isNull() ? null : rec.get("value").asText();
                try {
                    in.pipeInput(key, value, rec.get("ts").asLong());
                } catch (RuntimeException e) {
                    result.put("error", "pipe: " + describe(e));
                    return result;
                }
                ObjectNode step = steps.addObject();
                ObjectNode outs = step.putObject("outputs");
                for (Map.Entry<String, TestOutputTopic<String, ?>> e : outputs.entrySet()) {
                    ArrayNode rows = outs.putArray(e.getKey());
                    for (TestRecord<String, ?> r : e.getValue().readRecordsToList()) {
                        ArrayNode row = rows.addArray();
                        row.add(r.key());
                        row.addPOJO(r.value());
                        row.add(r.timestamp());
                    }
                }
                ObjectNode stores = step.putObject("stores");
                for (Map.Entry<String, String> s : built.stores().entrySet()) {
                    stores.set(s.getKey(), dumpStore(driver, s.getKey(), s.getValue(), keys));
                }
            }
        } catch (RuntimeException e) {
            result.put("error", "driver: " + describe(e));
        }
        return result;
    }

    /** A store's rows for the keys of the scenario's domain, in a shape both sides produce. */
    static ArrayNode dumpStore(TopologyTestDriver driver, String name, String kind, List<String> keys) {
        ArrayNode rows = JSON.createArrayNode();
        switch (kind) {
            case "kv" -> {
                var store = driver.<String, Object>getTimestampedKeyValueStore(name);
                for (String k : keys) {
                    ValueAndTimestamp<Object> vt = store.get(k);
                    if (vt != null) {
                        ArrayNode row = rows.addArray();
                        row.add(k);
                        row.addPOJO(vt.value());
                        row.add(vt.timestamp());
                    }
                }
            }
            case "window" -> {
                var store = driver.<String, Object>getTimestampedWindowStore(name);
                for (String k : keys) {
                    try (var it = store.fetch(k, Instant.ofEpochMilli(0), Instant.ofEpochMilli(Long.MAX_VALUE))) {
                        while (it.hasNext()) {
                            KeyValue<Long, ValueAndTimestamp<Object>> kv = it.next();
                            ArrayNode row = rows.addArray();
                            row.add(k);
                            row.add(kv.key);
                            row.addPOJO(kv.value.value());
                            row.add(kv.value.timestamp());
                        }
                    }
                }
            }
            case "session" -> {
                var store = driver.<String, Object>getSessionStore(name);
                for (String k : keys) {
                    try (KeyValueIterator<Windowed<String>, Object> it = store.fetch(k)) {
                        while (it.hasNext()) {
                            KeyValue<Windowed<String>, Object> kv = it.next();
                            ArrayNode row = rows.addArray();
                            row.add(k);
                            row.add(kv.key.window().start());
                            row.add(kv.key.window().end());
                            row.addPOJO(kv.value);
                        }
                    }
                }
            }
            default -> throw new IllegalArgumentException("unknown store kind " + kind);
        }
        return rows;
    }

    /** The exception and its causes, one line. */
    static String describe(Throwable e) {
        StringBuilder sb = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (sb.length() > 0) {
                sb.append(" <- ");
            }
            sb.append(t);
        }
        return sb.toString();
    }

    static Duration ms(long v) {
        return Duration.ofMillis(v);
    }
}
