package iqmesh.avropeer;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * What a Java producer with KafkaAvroSerializer writes and what a Java consumer with
 * KafkaAvroDeserializer reads, done by hand on Apache Avro (Confluent's serializers are not on
 * Maven Central): magic byte 0, the schema id (4 bytes, big-endian), the Avro binary body.
 *
 * <pre>
 * produce BOOTSTRAP REGISTRY_URL TOPIC SCHEMA_JSON          reads JSON records, one a line, on stdin
 * consume BOOTSTRAP REGISTRY_URL TOPIC COUNT TIMEOUT_MS     prints {"key":..,"schema_id":..,"value":{..}} lines
 * </pre>
 */
public final class AvroPeer {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "produce" -> produce(args[1], args[2], args[3], args[4]);
            case "consume" -> consume(args[1], args[2], args[3], Integer.parseInt(args[4]), Long.parseLong(args[5]));
            default -> throw new IllegalArgumentException("produce or consume, not " + args[0]);
        }
    }

    /** Registers the schema under TOPIC-value (TopicNameStrategy) and returns its id. */
    static int register(String registry, String subject, String schema) throws IOException, InterruptedException {
        ObjectNode body = JSON.createObjectNode().put("schema", schema);
        HttpRequest req = HttpRequest.newBuilder(URI.create(registry + "/subjects/" + subject + "/versions"))
                .header("Content-Type", "application/vnd.schemaregistry.v1+json")
                .POST(HttpRequest.BodyPublishers.ofString(JSON.writeValueAsString(body))).build();
        HttpResponse<String> resp = HTTP.send(req, HttpResponse.BodyHandlers.ofString());
        if (resp.statusCode() != 200) {
            throw new IOException("registering " + subject + ": HTTP " + resp.statusCode() + " " + resp.body());
        }
        return JSON.readTree(resp.body()).get("id").asInt();
    }

    static Schema fetch(String registry, int id) throws IOException, InterruptedException {
        HttpRequest req = HttpRequest.newBuilder(URI.create(registry + "/schemas/ids/" + id)).GET().build();
        HttpResponse<String> resp = HTTP.send(req, HttpResponse.BodyHandlers.ofString());
        if (resp.statusCode() != 200) {
            throw new IOException("schema " + id + ": HTTP " + resp.statusCode() + " " + resp.body());
        }
        return new Schema.Parser().parse(JSON.readTree(resp.body()).get("schema").asText());
    }

    static void produce(String bootstrap, String registry, String topic, String schemaJson) throws Exception {
        Schema schema = new Schema.Parser().parse(schemaJson);
        int id = register(registry, topic + "-value", schema.toString());
        GenericDatumWriter<GenericRecord> writer = new GenericDatumWriter<>(schema);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        try (KafkaProducer<String, byte[]> producer =
                     new KafkaProducer<>(p, new StringSerializer(), new ByteArraySerializer())) {
            java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isBlank()) continue;
                JsonNode node = JSON.readTree(line);
                GenericRecord rec = new GenericData.Record(schema);
                for (Schema.Field f : schema.getFields()) {
                    JsonNode v = node.get(f.name());
                    rec.put(f.name(), switch (f.schema().getType()) {
                        case LONG -> v.asLong();
                        case INT -> v.asInt();
                        default -> v.asText();
                    });
                }
                ByteArrayOutputStream out = new ByteArrayOutputStream();
                out.write(0);
                out.write(ByteBuffer.allocate(4).putInt(id).array());
                BinaryEncoder enc = EncoderFactory.get().binaryEncoder(out, null);
                writer.write(rec, enc);
                enc.flush();
                producer.send(new ProducerRecord<>(topic, null, out.toByteArray())).get();
            }
        }
        System.out.println("{\"schema_id\":" + id + "}");
    }

    static void consume(String bootstrap, String registry, String topic, int count, long timeoutMs) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("enable.auto.commit", "false");
        Map<Integer, Schema> schemas = new HashMap<>();
        List<String> lines = new ArrayList<>();
        try (KafkaConsumer<String, byte[]> consumer =
                     new KafkaConsumer<>(p, new StringDeserializer(), new ByteArrayDeserializer())) {
            List<TopicPartition> parts = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
                parts.add(new TopicPartition(topic, info.partition()));
            }
            consumer.assign(parts);
            consumer.seekToBeginning(parts);
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (lines.size() < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    ByteBuffer buf = ByteBuffer.wrap(r.value());
                    if (buf.get() != 0) throw new IOException("no magic byte at offset " + r.offset());
                    int id = buf.getInt();
                    Schema schema = schemas.get(id);
                    if (schema == null) {
                        schema = fetch(registry, id);
                        schemas.put(id, schema);
                    }
                    GenericRecord rec = new GenericDatumReader<GenericRecord>(schema).read(null,
                            DecoderFactory.get().binaryDecoder(r.value(), 5, r.value().length - 5, null));
                    ObjectNode line = JSON.createObjectNode();
                    line.put("key", r.key());
                    line.put("schema_id", id);
                    line.set("value", JSON.readTree(GenericData.get().toString(rec)));
                    lines.add(JSON.writeValueAsString(line));
                }
            }
        }
        lines.forEach(System.out::println);
    }
}
