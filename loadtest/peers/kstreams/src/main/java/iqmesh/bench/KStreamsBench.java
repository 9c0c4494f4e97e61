package iqmesh.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * One run of one benchmark workload on Kafka Streams, printing {@code RESULT {json}} with the fields
 * of iqmesh's loadtest/worker.py, so loadtest/throughput.py puts both side by side.
 *
 * <p>The workloads are those of loadtest/workloads.py (stateful count, stateless filter/map) and
 * examples/wordcount.py, on the same topics with the same serdes. A counter in a {@code peek} marks
 * the first and the target-th record as the stream thread reaches them: at the source for the
 * single-sub-topology workloads, after the repartition topic for the word count (so the target there
 * is the number of words, and every line has been processed when the last word is).
 */
public final class KStreamsBench {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Pattern WORD = Pattern.compile("\\W+", Pattern.UNICODE_CHARACTER_CLASS);

  private KStreamsBench() {}

  /**
   * Kafka Streams' own release, from the properties file its jar ships (the client's
   * AppInfoParser moved to an internals package in 4.4).
   */
  static String streamsVersion() {
    try (InputStream in = KafkaStreams.class.getResourceAsStream("/kafka/kafka-streams-version.properties")) {
      Properties p = new Properties();
      if (in != null) {
        p.load(in);
      }
      return p.getProperty("version", "unknown");
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** JSON values as trees, like iqmesh's JsonSerde (dicts). */
  static final class JsonSerde implements Serde<JsonNode> {
    @Override
    public Serializer<JsonNode> serializer() {
      return (topic, node) -> {
        if (node == null) {
          return null;
        }
        try {
          return JSON.writeValueAsBytes(node);
        } catch (IOException e) {
          throw new UncheckedIOException(e);
        }
      };
    }

    @Override
    public Deserializer<JsonNode> deserializer() {
      return (topic, data) -> {
        if (data == null) {
          return null;
        }
        try {
          return JSON.readTree(data);
        } catch (IOException e) {
          throw new UncheckedIOException(e);
        }
      };
    }
  }

  /**
   * Marks when the first, the middle and the target-th record reach the counting point (stream
   * thread only), and the process's CPU time at the middle and at the end: the second half is the
   * steady state, with start-up and most JIT compilation behind (the same fields as iqmesh's worker).
   */
  static final class Progress {
    final long target;
    final long half;
    final CountDownLatch done = new CountDownLatch(1);
    volatile long seen;
    volatile long firstNs;
    volatile long halfNs;
    volatile long lastNs;
    volatile long cpuHalfNs;
    volatile long cpuLastNs;

    Progress(long target) {
      this.target = target;
      this.half = (target + 1) / 2;
    }

    void tick() {
      long c = seen + 1; // one writer: the single stream thread
      seen = c;
      if (c == 1) {
        firstNs = System.nanoTime();
      }
      if (c == half) {
        halfNs = System.nanoTime();
        cpuHalfNs = processCpuNs();
      }
      if (c == target) {
        lastNs = System.nanoTime();
        cpuLastNs = processCpuNs();
        done.countDown();
      }
    }
  }

  /** CPU time of every thread of this JVM (GC and JIT compiler threads too). */
  static long processCpuNs() {
    return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
        .getProcessCpuTime();
  }

  static Topology stateful(String in, String out, boolean cache, Progress p) {
    StreamsBuilder b = new StreamsBuilder();
    Serde<JsonNode> json = new JsonSerde();
    Materialized<Bytes, JsonNode, KeyValueStore<Bytes, byte[]>> store =
        Materialized.<Bytes, JsonNode, KeyValueStore<Bytes, byte[]>>as("counts")
            .withKeySerde(Serdes.Bytes())
            .withValueSerde(json);
    if (!cache) {
      store = store.withCachingDisabled();
    }
    b.stream(in, Consumed.with(Serdes.Bytes(), json))
        .peek((k, v) -> p.tick())
        .groupByKey(Grouped.with(Serdes.Bytes(), json))
        .aggregate(
            () -> JSON.createObjectNode().put("count", 0),
            (k, v, agg) -> {
              ObjectNode next = JSON.createObjectNode();
              next.put("count", agg.get("count").asLong() + 1);
              next.set("page", v.get("page"));
              return next;
            },
            store)
        .toStream()
        .to(out, Produced.with(Serdes.Bytes(), json));
    return b.build();
  }

  static Topology stateless(String in, String out, Progress p) {
    StreamsBuilder b = new StreamsBuilder();
    Serde<JsonNode> json = new JsonSerde();
    b.stream(in, Consumed.with(Serdes.Bytes(), json))
        .peek((k, v) -> p.tick())
        .filter((k, v) -> v.get("ms").asLong() >= 100)
        .mapValues(
            v -> {
              ObjectNode o = JSON.createObjectNode();
              o.set("page", v.get("page"));
              o.set("ms", v.get("ms"));
              o.put("slow", v.get("ms").asLong() > 500);
              return (JsonNode) o;
            })
        .to(out, Produced.with(Serdes.Bytes(), json));
    return b.build();
  }

  /** WordCountLambdaExample: groupBy(word) written as selectKey + repartition to count after it. */
  static Topology wordcount(String in, String out, boolean cache, Progress p) {
    StreamsBuilder b = new StreamsBuilder();
    Materialized<String, Long, KeyValueStore<Bytes, byte[]>> store =
        Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts")
            .withKeySerde(Serdes.String())
            .withValueSerde(Serdes.Long());
    if (!cache) {
      store = store.withCachingDisabled();
    }
    KStream<String, String> words =
        b.stream(in, Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(
                line ->
                    Arrays.stream(WORD.split(line.toLowerCase(Locale.ROOT)))
                        .filter(w -> !w.isEmpty())
                        .toList())
            .selectKey((k, w) -> w)
            .repartition(Repartitioned.with(Serdes.String(), Serdes.String()).withName("words"));
    words
        .peek((k, v) -> p.tick())
        .groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
        .count(store)
        .toStream()
        .to(out, Produced.with(Serdes.String(), Serdes.Long()));
    return b.build();
  }

  private static Map<String, String> parse(String[] argv) {
    Map<String, String> a = new HashMap<>();
    for (int i = 0; i < argv.length; i++) {
      String k = argv[i];
      if (k.equals("--cache")) {
        a.put("cache", "true");
      } else if (k.startsWith("-") && i + 1 < argv.length) {
        a.put(k.replaceFirst("^-+", ""), argv[++i]);
      } else {
        throw new IllegalArgumentException("unexpected argument: " + k);
      }
    }
    for (String req : new String[] {"bootstrap", "topic", "n", "mode", "out"}) {
      if (!a.containsKey(req)) {
        throw new IllegalArgumentException("missing --" + req);
      }
    }
    return a;
  }

  private static void deleteTree(Path root) {
    try (Stream<Path> s = Files.walk(root)) {
      s.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
    } catch (IOException e) {
      // best effort: a temp folder
    }
  }

  public static void main(String[] argv) throws Exception {
    Map<String, String> a;
    try {
      a = parse(argv);
    } catch (IllegalArgumentException e) {
      System.err.println("usage: --bootstrap H:P --topic T -n N --mode stateful|stateless|wordcount"
          + " --out TOPIC [--guarantee at-least-once|exactly-once] [--cache] [--target R]"
          + " [--tag S] [--timeout-s S]: " + e.getMessage());
      System.exit(2);
      return;
    }
    long n = Long.parseLong(a.get("n"));
    long target = Long.parseLong(a.getOrDefault("target", a.get("n")));
    String mode = a.get("mode");
    String guarantee = a.getOrDefault("guarantee", "at-least-once");
    boolean cache = a.containsKey("cache");
    String in = a.get("topic");
    String out = a.get("out");
    Progress p = new Progress(target);
    Topology topology = switch (mode) {
      case "stateful" -> stateful(in, out, cache, p);
      case "stateless" -> stateless(in, out, p);
      case "wordcount" -> wordcount(in, out, cache, p);
      default -> throw new IllegalArgumentException("unknown --mode " + mode);
    };

    String run = UUID.randomUUID().toString().substring(0, 8);
    Path stateDir = Files.createTempDirectory("kstreams-bench-");
    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, "ks-bench-" + mode + "-" + run);
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("bootstrap"));
    props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
    props.put(StreamsConfig.CLIENT_ID_CONFIG, "ks-bench-" + run);
    props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG,
        guarantee.equals("exactly-once") ? StreamsConfig.EXACTLY_ONCE_V2 : StreamsConfig.AT_LEAST_ONCE);
    // internal topics on a one-node broker; every other setting is Kafka Streams' default, as on
    // the iqmesh side (one stream thread, commit.interval.ms 30 s / 100 ms, 10 MB cache)
    props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
    props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

    AtomicReference<Throwable> error = new AtomicReference<>();
    KafkaStreams streams = new KafkaStreams(topology, props);
    streams.setUncaughtExceptionHandler(e -> {
      error.compareAndSet(null, e);
      p.done.countDown();
      return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
    });
    long timeoutS = Long.parseLong(a.getOrDefault("timeout-s", "900"));
    long tInit = System.nanoTime();
    streams.start();
    p.done.await(timeoutS, TimeUnit.SECONDS);
    streams.close();
    long tEnd = System.nanoTime();
    deleteTree(stateDir);

    boolean ok = p.lastNs != 0 && error.get() == null;
    double el = (p.lastNs - p.firstNs) / 1e9;
    Map<String, Object> res = new LinkedHashMap<>();
    res.put("tag", a.getOrDefault("tag", ""));
    res.put("lib", "kafka-streams");
    res.put("version", streamsVersion());
    res.put("mode", mode);
    res.put("guarantee", guarantee);
    res.put("cache", cache);
    res.put("n", n);
    res.put("target", target);
    res.put("processed", p.seen);
    res.put("ok", ok);
    res.put("startup_s", p.firstNs != 0 ? round3((p.firstNs - tInit) / 1e9) : null);
    res.put("first_to_last_s", ok ? round3(el) : null);
    res.put("rate_first_to_last", ok && el > 0 ? Math.round(n / el) : null);
    res.put("rate_incl_final_commit", ok ? Math.round(n / ((tEnd - p.firstNs) / 1e9)) : null);
    long second = n - (n + 1) / 2;
    boolean steady = ok && p.halfNs != 0 && p.lastNs > p.halfNs;
    res.put("steady_rate", steady ? Math.round(second / ((p.lastNs - p.halfNs) / 1e9)) : null);
    res.put("steady_cpu_us", steady ? round3((p.cpuLastNs - p.cpuHalfNs) / 1e3 / second) : null);
    res.put("out_topic", out);
    res.put("error", error.get() == null ? null : error.get().toString());
    System.out.println("RESULT " + JSON.writeValueAsString(res));
    System.out.flush();
    System.exit(ok ? 0 : 2);
  }

  private static double round3(double x) {
    return Math.round(x * 1000) / 1000.0;
  }
}
