package iqmesh.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.CogroupedKStream;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.WindowStore;

/**
 * The topology templates; tests/oracle/templates.py builds the same ones with iqmesh's DSL. Keys
 * are Strings, input values Strings of small numbers (or null); aggregates are Longs (values
 * parsed, null as 0) or Strings joined with '+'; join results are "left|right" ("null" for a
 * missing side). A windowed result's key is written as "key@start/end".
 */
final class Templates {
    record Built(Topology topology, Map<String, Deserializer<?>> outputs, Map<String, String> stores) {
    }

    private static final Serde<String> S = Serdes.String();
    private static final Serde<Long> L = Serdes.Long();

    private Templates() {
    }

    static long num(String v) {
        return v == null ? 0L : Long.parseLong(v);
    }

    static String cat(String a, String b) {
        return a + "+" + b;
    }

    static String pair(String l, String r) {
        return l + "|" + r;
    }

    static String windowKey(Windowed<String> wk) {
        return wk.key() + "@" + wk.window().start() + "/" + wk.window().end();
    }

    static Built build(String template, JsonNode p) {
        return switch (template) {
            case "windowed" -> windowed(p);
            case "count_suppress" -> countSuppress(p);
            case "stream_table_join" -> streamTableJoin(p);
            case "table_table_join" -> tableTableJoin(p);
            case "stream_stream_join" -> streamStreamJoin(p);
            case "table_groupby" -> tableGroupBy(p);
            case "cogroup" -> cogroup(p);
            case "global_join" -> globalJoin(p);
            case "fk_join" -> fkJoin(p);
            default -> throw new IllegalArgumentException("unknown template " + template);
        };
    }

    private static <K, V, St extends org.apache.kafka.streams.processor.StateStore> Materialized<K, V, St> caching(
            Materialized<K, V, St> m, JsonNode p) {
        return p.path("caching").asBoolean(false) ? m.withCachingEnabled() : m.withCachingDisabled();
    }

    /** Tumbling / hopping / sliding / session windows; count, reduce or aggregate; grace; emit
     * strategy; optionally suppressed. */
    static Built windowed(JsonNode p) {
        StreamsBuilder b = new StreamsBuilder();
        String kind = p.get("kind").asText();
        String op = p.get("op").asText();
        long size = p.path("size").asLong(10);
        long grace = p.path("grace").asLong(0);
        boolean onClose = "close".equals(p.path("emit").asText("update"));
        KGroupedStream<String, String> g = b.stream("in", Consumed.with(S, S)).groupByKey(Grouped.with(S, S));
        KTable<Windowed<String>, ?> table;
        boolean longs = !"reduce".equals(op);
        if ("session".equals(kind)) {
            var w = g.windowedBy(SessionWindows.ofInactivityGapAndGrace(Oracle.ms(size), Oracle.ms(grace)));
            if (onClose) {
                w = w.emitStrategy(EmitStrategy.onWindowClose());
            }
            Materialized<String, Long, SessionStore<Bytes, byte[]>> ml = caching(
                    Materialized.<String, Long, SessionStore<Bytes, byte[]>>as("win-store").withValueSerde(L), p);
            Materialized<String, String, SessionStore<Bytes, byte[]>> ms = caching(
                    Materialized.<String, String, SessionStore<Bytes, byte[]>>as("win-store").withValueSerde(S), p);
            table = switch (op) {
                case "count" -> w.count(ml);
                case "reduce" -> w.reduce(Templates::cat, ms);
                default -> w.aggregate(() -> 0L, (k, v, agg) -> agg + num(v), (k, a, c) -> a + c, ml);
            };
        } else {
            var windows = "sliding".equals(kind) ? null
                    : TimeWindows.ofSizeAndGrace(Oracle.ms(size), Oracle.ms(grace));
            if (windows != null && "hopping".equals(kind)) {
                windows = windows.advanceBy(Oracle.ms(p.get("advance").asLong()));
            }
            var w = windows != null ? g.windowedBy(windows)
                    : g.windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(Oracle.ms(size), Oracle.ms(grace)));
            if (onClose) {
                w = w.emitStrategy(EmitStrategy.onWindowClose());
            }
            Materialized<String, Long, WindowStore<Bytes, byte[]>> ml = caching(
                    Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("win-store").withValueSerde(L), p);
            Materialized<String, String, WindowStore<Bytes, byte[]>> ms = caching(
                    Materialized.<String, String, WindowStore<Bytes, byte[]>>as("win-store").withValueSerde(S), p);
            table = switch (op) {
                case "count" -> w.count(ml);
                case "reduce" -> w.reduce(Templates::cat, ms);
                default -> w.aggregate(() -> 0L, (k, v, agg) -> agg + num(v), ml);
            };
        }
        String suppress = p.path("suppress").asText("none");
        if ("window_close".equals(suppress)) {
            table = suppressAny(table, Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()));
        } else if ("time_limit".equals(suppress)) {
            table = suppressAny(table, Suppressed.untilTimeLimit(Oracle.ms(p.get("limit").asLong()),
                    Suppressed.BufferConfig.unbounded()));
        }
        toOut(table, longs ? L : S);
        Map<String, Deserializer<?>> outputs = Map.of("out", longs ? L.deserializer() : S.deserializer());
        Map<String, String> stores = Map.of("win-store", "session".equals(kind) ? "session" : "window");
        return new Built(b.build(), outputs, stores);
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static KTable<Windowed<String>, ?> suppressAny(KTable table, Suppressed s) {
        return table.suppress(s);
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static void toOut(KTable<Windowed<String>, ?> table, Serde<?> values) {
        KTable t = table;
        KStream<Windowed<String>, Object> s = t.toStream();
        s.selectKey((wk, v) -> windowKey(wk)).to("out", (Produced) Produced.with(S, (Serde) values));
    }

    /** A count per key, suppressed until a time limit passes (stream time). */
    static Built countSuppress(JsonNode p) {
        StreamsBuilder b = new StreamsBuilder();
        b.stream("in", Consumed.with(S, S)).groupByKey(Grouped.with(S, S))
                .count(caching(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("count-store"), p))
                .suppress(Suppressed.untilTimeLimit(Oracle.ms(p.get("limit").asLong()),
                        Suppressed.BufferConfig.unbounded()))
                .toStream().to("out", Produced.with(S, L));
        return new Built(b.build(), Map.of("out", L.deserializer()), Map.of("count-store", "kv"));
    }

    /** A stream (left) joined with a table (right): inner or left; the table versioned, the join
     * with a grace period, if asked. */
    static Built streamTableJoin(JsonNode p) {
        StreamsBuilder b = new StreamsBuilder();
        long history = p.path("history").asLong(0);
        long grace = p.path("grace").asLong(-1);
        KTable<String, String> right;
        Map<String, String> stores = new LinkedHashMap<>();
        if (history > 0) {
            right = b.table("right", Consumed.with(S, S), Materialized.<String, String>as(
                    Stores.persistentVersionedKeyValueStore("right-store", Oracle.ms(history)))
                    .withKeySerde(S).withValueSerde(S));
        } else {
            right = b.table("right", Consumed.with(S, S), caching(
                    Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("right-store"), p));
            stores.put("right-store", "kv");
        }
        Joined<String, String, String> joined = Joined.with(S, S, S);
        if (grace >= 0) {
            joined = joined.withGracePeriod(Oracle.ms(grace));
        }
        KStream<String, String> left = b.stream("left", Consumed.with(S, S));
        KStream<String, String> out = "left".equals(p.get("mode").asText())
                ? left.leftJoin(right, Templates::pair, joined)
                : left.join(right, Templates::pair, joined);
        out.to("out", Produced.with(S, S));
        return new Built(b.build(), Map.of("out", S.deserializer()), stores);
    }

    /** Two tables joined: inner, left or outer; caching on or off on every store. */
    static Built tableTableJoin(JsonNode p) {
        StreamsBuilder b = new StreamsBuilder();
        KTable<String, String> left = b.table("left", Consumed.with(S, S), caching(
                Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("left-store"), p));
        KTable<String, String> right = b.table("right", Consumed.with(S, S), caching(
                Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("right-store"), p));
        Materialized<String, String, KeyValueStore<Bytes, byte[]>> m = caching(
                Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("join-store")
                        .withKeySerde(S).withValueSerde(S), p);
        KTable<String, String> joined = switch (p.get("mode").asText()) {
            case "left" -> left.leftJoin(right, Templates::pair, m);
            case "outer" -> left.outerJoin(right, Templates::pair, m);
            default -> left.join(right, Templates::pair, m);
        };
        joined.toStream().to("out", Produced.with(S, S));
        Map<String, String> stores = new LinkedHashMap<>();
        stores.put("left-store", "kv");
        stores.put("right-store", "kv");
        stores.put("join-store", "kv");
        return new Built(b.build(), Map.of("out", S.deserializer()), stores);
    }

    /** The foreign key of a left value: "a", "b" or "c" by the number, none for "4". */
    static String foreignKey(String v) {
        return "4".equals(v) ? null : String.valueOf("abc".charAt((int) (num(v) % 3)));
    }

    /** The foreign key of a left row from its key and value: shifted by the key's place in "abc". */
    static String foreignKeyOf(String k, String v) {
        return "4".equals(v) ? null : String.valueOf("abc".charAt((int) ((num(v) + "abc".indexOf(k)) % 3)));
    }

    /** A foreign-key table-table join (KIP-213), inner or left; caching on or off on every store. */
    static Built fkJoin(JsonNode p) {
        StreamsBuilder b = new StreamsBuilder();
        KTable<String, String> left = b.table("left", Consumed.with(S, S), caching(
                Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("left-store"), p));
        KTable<String, String> right = b.table("right", Consumed.with(S, S), caching(
                Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("right-store"), p));
        Materialized<String, String, KeyValueStore<Bytes, byte[]>> m = caching(
                Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("join-store")
                        .withKeySerde(S).withValueSerde(S), p);
        boolean leftJoin = "left".equals(p.get("mode").asText());
        KTable<String, String> joined;
        if ("key_value".equals(p.path("extractor").asText("value"))) {
            // KIP-1104: the extractor sees the key too
            java.util.function.BiFunction<String, String, String> fk = Templates::foreignKeyOf;
            joined = leftJoin ? left.leftJoin(right, fk, Templates::pair, m) : left.join(right, fk, Templates::pair, m);
        } else {
            java.util.function.Function<String, String> fk = Templates::foreignKey;
            joined = leftJoin ? left.leftJoin(right, fk, Templates::pair, m) : left.join(right, fk, Templates::pair, m);
        }
        joined.toStream().to("out", Produced.with(S, S));
        Map<String, String> stores = new LinkedHashMap<>();
        stores.put("left-store", "kv");
        stores.put("right-store", "kv");
        stores.put("join-store", "kv");
        return new Built(b.build(), Map.of("out", S.deserializer()), stores);
    }

    /** Two streams joined within windows (before / after / grace): inner, left or outer. */
    static Built streamStreamJoin(JsonNode p) {
        StreamsBuilder b = new StreamsBuilder();
        JoinWindows w = JoinWindows.ofTimeDifferenceAndGrace(Oracle.ms(p.get("before").asLong()),
                Oracle.ms(p.get("grace").asLong())).after(Oracle.ms(p.get("after").asLong()));
        KStream<String, String> left = b.stream("left", Consumed.with(S, S));
        KStream<String, String> right = b.stream("right", Consumed.with(S, S));
        StreamJoined<String, String, String> sj = StreamJoined.with(S, S, S);
        KStream<String, String> out = switch (p.get("mode").asText()) {
            case "left" -> left.leftJoin(right, Templates::pair, w, sj);
            case "outer" -> left.outerJoin(right, Templates::pair, w, sj);
            default -> left.join(right, Templates::pair, w, sj);
        };
        out.to("out", Produced.with(S, S));
        return new Built(b.build(), Map.of("out", S.deserializer()), Map.of());
    }

    /** A table re-grouped by value ("g" + value mod 3) and aggregated with an adder and a
     * subtractor (sum), or counted. */
    static Built tableGroupBy(JsonNode p) {
        StreamsBuilder b = new StreamsBuilder();
        KTable<String, String> in = b.table("in", Consumed.with(S, S), caching(
                Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("in-store"), p));
        var grouped = in.groupBy((k, v) -> KeyValue.pair("g" + (num(v) % 3), v), Grouped.with(S, S));
        Materialized<String, Long, KeyValueStore<Bytes, byte[]>> m = caching(
                Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("agg-store").withValueSerde(L), p);
        KTable<String, Long> agg = "count".equals(p.path("op").asText("aggregate"))
                ? grouped.count(m)
                : grouped.aggregate(() -> 0L, (k, v, a) -> a + num(v), (k, v, a) -> a - num(v), m);
        agg.toStream().to("out", Produced.with(S, L));
        Map<String, String> stores = new LinkedHashMap<>();
        stores.put("in-store", "kv");
        stores.put("agg-store", "kv");
        return new Built(b.build(), Map.of("out", L.deserializer()), stores);
    }

    /** Two streams cogrouped into one String aggregate ("a" + value / "b" + value appended),
     * optionally in tumbling windows. */
    static Built cogroup(JsonNode p) {
        StreamsBuilder b = new StreamsBuilder();
        KGroupedStream<String, String> one = b.stream("in", Consumed.with(S, S)).groupByKey(Grouped.with(S, S));
        KGroupedStream<String, String> two = b.stream("in2", Consumed.with(S, S)).groupByKey(Grouped.with(S, S));
        CogroupedKStream<String, String> c = one.<String>cogroup((k, v, a) -> a + "a" + v)
                .cogroup(two, (k, v, a) -> a + "b" + v);
        long size = p.path("size").asLong(0);
        if (size > 0) {
            var t = c.windowedBy(TimeWindows.ofSizeAndGrace(Oracle.ms(size), Oracle.ms(p.path("grace").asLong(0))))
                    .aggregate(() -> "", caching(Materialized.<String, String, WindowStore<Bytes, byte[]>>as(
                            "cogroup-store").withValueSerde(S), p));
            t.toStream().selectKey((wk, v) -> windowKey(wk)).to("out", Produced.with(S, S));
            return new Built(b.build(), Map.of("out", S.deserializer()), Map.of("cogroup-store", "window"));
        }
        c.aggregate(() -> "", caching(Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as(
                "cogroup-store").withValueSerde(S), p)).toStream().to("out", Produced.with(S, S));
        return new Built(b.build(), Map.of("out", S.deserializer()), Map.of("cogroup-store", "kv"));
    }

    /** A stream joined with a global table on the record's key: inner or left. */
    static Built globalJoin(JsonNode p) {
        StreamsBuilder b = new StreamsBuilder();
        GlobalKTable<String, String> g = b.globalTable("g", Consumed.with(S, S),
                Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("g-store"));
        KStream<String, String> in = b.stream("in", Consumed.with(S, S));
        KStream<String, String> out = "left".equals(p.get("mode").asText())
                ? in.leftJoin(g, (k, v) -> k, Templates::pair)
                : in.join(g, (k, v) -> k, Templates::pair);
        out.to("out", Produced.with(S, S));
        return new Built(b.build(), Map.of("out", S.deserializer()), Map.of("g-store", "kv"));
    }
}
