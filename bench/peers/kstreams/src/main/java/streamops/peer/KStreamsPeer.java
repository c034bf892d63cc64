package streamops.peer;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.processor.api.RecordMetadata;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * The Kafka Streams peer of streamops' user_activity app (issue 39), run by bench/vs_kstreams.py.
 *
 * <pre>
 * java -cp target/kstreams-peer.jar:target/lib/* streamops.peer.KStreamsPeer --bootstrap HOST:PORT \
 *     [--input user-events] [--output kstreams-profiles] [--dlq kstreams-events.dlq] [--app-id kstreams-peer] \
 *     [--state-dir DIR] [--records N] [--idle-timeout-s 30]
 * java -cp ... streamops.peer.KStreamsPeer --validate   # stdin: one value a line (base64, "-" = null)
 * </pre>
 *
 * Topology (Processor API): input -> {@code validate} (fold.validate, {@link Contract}) -> rejected records to
 * the DLQ (the raw key and value, cut to 256 KiB as streamops does, with the reason and the source topic,
 * partition and offset in streamops' DLQ headers); valid events to {@code fold}, whose RocksDB store
 * ({@code profiles}, caching off, changelogged) holds each user's profile; each update writes the profile
 * (fold.profile_json's bytes) keyed by user id to the output. An event is folded where it is when its record
 * is keyed by its user id and sits in that key's partition (Kafka's default partitioner: what the demo's
 * producer does), else it goes through {@code APP_ID-rekey} (as many partitions as the input) keyed by its
 * user id first, so every user's events meet in one task whatever the input's keys.
 *
 * exactly_once_v2, 2 stream threads, statestore.cache.max.bytes=0, other settings Kafka Streams' defaults
 * (commit.interval.ms 100 under exactly-once). It stops by itself after {@code --records} input records
 * (0: no limit) or when no record came for {@code --idle-timeout-s} (0: never; SIGTERM also stops it),
 * closing the streams cleanly (the last transaction commits), and prints one JSON line: records, the
 * first and last processing times (epoch ms), records/s between them, and the time the close took.
 */
public final class KStreamsPeer {
    static final String STORE = "profiles";
    static final int DLQ_MAX_BYTES = 256 * 1024;
    // streamops.app.topics
    static final String H_REASON = "streamops.dlq.reason";
    static final String H_TRUNCATED = "streamops.dlq.truncated";
    static final String H_SOURCE_TOPIC = "streamops.source.topic";
    static final String H_SOURCE_PARTITION = "streamops.source.partition";
    static final String H_SOURCE_OFFSET = "streamops.source.offset";

    // what the processors count (all threads)
    static final LongAdder RECORDS = new LongAdder();
    static final LongAdder REJECTED = new LongAdder();
    static final LongAdder REKEYED = new LongAdder();
    static final AtomicLong FIRST_NANOS = new AtomicLong(0);
    static final AtomicLong LAST_NANOS = new AtomicLong(0);

    // stopping: the latch the main loop waits on, and the end of run() that a SIGTERM's hook waits for
    static final CountDownLatch STOP = new CountDownLatch(1);
    static final CountDownLatch DONE = new CountDownLatch(1);
    static final AtomicBoolean SIGNALLED = new AtomicBoolean(false);

    private KStreamsPeer() {}

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = parseArgs(argv);
        if (args.containsKey("validate")) {
            validateStdin();
            return;
        }
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", args.getOrDefault("log-level", "warn"));
        int rc;
        try {
            rc = run(args);
        } finally {
            DONE.countDown();
        }
        if (!SIGNALLED.get()) {
            System.exit(rc); // (not from within a shutdown: exit would wait for the hook, which waits for us)
        }
    }

    static Map<String, String> parseArgs(String[] argv) {
        Map<String, String> out = new HashMap<>();
        for (int k = 0; k < argv.length; k++) {
            if (!argv[k].startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument " + argv[k]);
            }
            String name = argv[k].substring(2);
            if (name.equals("validate")) {
                out.put(name, "");
            } else if (k + 1 < argv.length) {
                out.put(name, argv[++k]);
            } else {
                throw new IllegalArgumentException("--" + name + " needs a value");
            }
        }
        return out;
    }

    // -- the validation alone, for bench/vs_kstreams.py's comparison with fold.validate ---------------------------
    /**
     * Per stdin line (base64 of a value, "-" for null): the reason, or "ok CENTS TS TYPE USER_ID_JSON"; then
     * "profile JSON" for each user, the valid events folded as the app folds them.
     */
    static void validateStdin() throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        StringBuilder out = new StringBuilder();
        Map<String, Contract.Profile> profiles = new HashMap<>();
        for (String line; (line = in.readLine()) != null; ) {
            byte[] value = line.equals("-") ? null : Base64.getDecoder().decode(line.trim());
            Contract.Checked c = Contract.validate(value);
            if (c.reason() != null) {
                out.append(c.reason());
            } else {
                Contract.Event e = c.event();
                profiles.merge(e.userId(), Contract.Profile.EMPTY.plus(e), (p, q) -> p.plus(e));
                out.append("ok ").append(e.cents()).append(' ').append(e.ts()).append(' ')
                        .append(Contract.EVENT_TYPES[e.type()]).append(' ');
                PyJson.appendString(out, e.userId());
            }
            out.append('\n');
        }
        profiles.forEach((user, p) -> out.append("profile ")
                .append(new String(p.json(user), StandardCharsets.US_ASCII)).append('\n'));
        System.out.print(out);
        System.out.flush();
    }

    // -- serdes ----------------------------------------------------------------------------------------------
    /** An event on the rekey topic (the key is its user id): type, cents, ts; read back by RekeyedEvents. */
    static byte[] eventBytes(Contract.Event e) {
        return ByteBuffer.allocate(17).put(e.type()).putLong(e.cents()).putLong(e.ts()).array();
    }

    /** A profile in the store: four longs. */
    static Serde<Contract.Profile> profileSerde() {
        Serializer<Contract.Profile> ser = (topic, p) -> ByteBuffer.allocate(32).putLong(p.lastLoginTs())
                .putLong(p.purchases()).putLong(p.cents()).putLong(p.events()).array();
        Deserializer<Contract.Profile> de = (topic, data) -> {
            if (data == null) {
                return null;
            }
            ByteBuffer b = ByteBuffer.wrap(data);
            return new Contract.Profile(b.getLong(), b.getLong(), b.getLong(), b.getLong());
        };
        return Serdes.serdeFrom(ser, de);
    }

    // -- processors ------------------------------------------------------------------------------------------
    /** fold.validate; rejected records to the DLQ, valid events to the fold (directly or through the rekey topic). */
    static final class Validate implements Processor<byte[], byte[], Object, Object> {
        private final int inputPartitions;
        private ProcessorContext<Object, Object> context;

        Validate(int inputPartitions) {
            this.inputPartitions = inputPartitions;
        }

        @Override
        public void init(ProcessorContext<Object, Object> context) {
            this.context = context;
        }

        @Override
        public void process(Record<byte[], byte[]> record) {
            if (FIRST_NANOS.get() == 0) {
                FIRST_NANOS.compareAndSet(0, System.nanoTime());
            }
            Contract.Checked c = Contract.validate(record.value());
            RecordMetadata meta = context.recordMetadata().orElseThrow();
            if (c.reason() != null) {
                REJECTED.increment();
                context.forward(dlqRecord(record, c.reason(), meta), "dlq");
            } else {
                Contract.Event e = c.event();
                byte[] uid = e.userId().getBytes(StandardCharsets.UTF_8);
                byte[] key = record.key();
                boolean placed = key != null && java.util.Arrays.equals(key, uid)
                        && meta.partition() == Utils.toPositive(Utils.murmur2(uid)) % inputPartitions;
                if (!placed) {
                    REKEYED.increment();
                }
                context.forward(new Record<Object, Object>(e.userId(), e, record.timestamp()), placed ? "fold" : "rekey");
            }
            RECORDS.increment();
            LAST_NANOS.setOpaque(System.nanoTime());
        }

        static Record<Object, Object> dlqRecord(Record<byte[], byte[]> record, String reason, RecordMetadata meta) {
            byte[] key = record.key();
            byte[] value = record.value();
            RecordHeaders headers = new RecordHeaders();
            headers.add(H_REASON, reason.getBytes(StandardCharsets.UTF_8));
            headers.add(H_SOURCE_TOPIC, meta.topic().getBytes(StandardCharsets.UTF_8));
            headers.add(H_SOURCE_PARTITION, Integer.toString(meta.partition()).getBytes(StandardCharsets.UTF_8));
            headers.add(H_SOURCE_OFFSET, Long.toString(meta.offset()).getBytes(StandardCharsets.UTF_8));
            int keyBytes = key == null ? 0 : key.length;
            int valueBytes = value == null ? 0 : value.length;
            if (Math.max(keyBytes, valueBytes) > DLQ_MAX_BYTES) {
                key = key == null ? null : java.util.Arrays.copyOf(key, Math.min(key.length, DLQ_MAX_BYTES));
                value = value == null ? null : java.util.Arrays.copyOf(value, Math.min(value.length, DLQ_MAX_BYTES));
                headers.add(H_TRUNCATED, String.format(Locale.ROOT, "{\"key_bytes\": %d, \"value_bytes\": %d}",
                        keyBytes, valueBytes).getBytes(StandardCharsets.UTF_8));
            }
            return new Record<>(key, value, record.timestamp(), headers);
        }
    }

    /** The rekey topic's records back as events (the key is the user id). */
    static final class RekeyedEvents implements Processor<String, byte[], Object, Object> {
        private ProcessorContext<Object, Object> context;

        @Override
        public void init(ProcessorContext<Object, Object> context) {
            this.context = context;
        }

        @Override
        public void process(Record<String, byte[]> record) {
            ByteBuffer b = ByteBuffer.wrap(record.value());
            Contract.Event e = new Contract.Event(record.key(), b.get(), b.getLong(), b.getLong());
            context.forward(new Record<Object, Object>(e.userId(), e, record.timestamp()));
        }
    }

    /** The fold: each event updates its user's profile in the store and writes the profile out. */
    static final class Fold implements Processor<Object, Object, String, byte[]> {
        private ProcessorContext<String, byte[]> context;
        private KeyValueStore<String, Contract.Profile> store;

        @Override
        public void init(ProcessorContext<String, byte[]> context) {
            this.context = context;
            this.store = context.getStateStore(STORE);
        }

        @Override
        public void process(Record<Object, Object> record) {
            Contract.Event e = (Contract.Event) record.value();
            Contract.Profile p = store.get(e.userId());
            p = (p == null ? Contract.Profile.EMPTY : p).plus(e);
            store.put(e.userId(), p);
            context.forward(new Record<>(e.userId(), p.json(e.userId()), record.timestamp()));
        }
    }

    // -- the app ---------------------------------------------------------------------------------------------
    static Topology topology(String input, String output, String dlq, String rekey, int inputPartitions) {
        Topology t = new Topology();
        t.addSource("input", new ByteArrayDeserializer(), new ByteArrayDeserializer(), input);
        t.addProcessor("validate", () -> new Validate(inputPartitions), "input");
        t.addSink("dlq", dlq, new ByteArraySerializer(), new ByteArraySerializer(), "validate");
        Serializer<Object> keyOut = (topic, k) -> ((String) k).getBytes(StandardCharsets.UTF_8);
        Serializer<Object> eventOut = (topic, v) -> eventBytes((Contract.Event) v);
        t.addSink("rekey", rekey, keyOut, eventOut, "validate");
        t.addSource("rekeyed", new StringDeserializer(), new ByteArrayDeserializer(), rekey);
        t.addProcessor("from-rekey", RekeyedEvents::new, "rekeyed");
        t.addProcessor("fold", Fold::new, "validate", "from-rekey");
        t.addStateStore(Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore(STORE), Serdes.String(),
                profileSerde()).withCachingDisabled(), "fold");
        t.addSink("output", output, new StringSerializer(), new ByteArraySerializer(), "fold");
        return t;
    }

    /** The input's partition count (waits for the topic); creates the rekey topic with as many. */
    static int prepareTopics(String bootstrap, String input, String rekey) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(p)) {
            long deadline = System.currentTimeMillis() + 120_000;
            int partitions;
            while (true) {
                try {
                    TopicDescription d = admin.describeTopics(List.of(input)).allTopicNames().get(30, TimeUnit.SECONDS)
                            .get(input);
                    partitions = d.partitions().size();
                    break;
                } catch (java.util.concurrent.ExecutionException e) {
                    if (System.currentTimeMillis() > deadline) {
                        throw e;
                    }
                    Thread.sleep(500);
                }
            }
            try {
                admin.createTopics(List.of(new NewTopic(rekey, partitions, (short) -1))).all().get(60, TimeUnit.SECONDS);
            } catch (java.util.concurrent.ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) {
                    throw e;
                }
            }
            return partitions;
        }
    }

    static int run(Map<String, String> args) throws Exception {
        String bootstrap = args.get("bootstrap");
        if (bootstrap == null) {
            throw new IllegalArgumentException("--bootstrap HOST:PORT is required");
        }
        String input = args.getOrDefault("input", "user-events");
        String output = args.getOrDefault("output", "kstreams-profiles");
        String dlq = args.getOrDefault("dlq", "kstreams-events.dlq");
        String appId = args.getOrDefault("app-id", "kstreams-peer");
        long target = Long.parseLong(args.getOrDefault("records", "0"));
        long idleNanos = TimeUnit.SECONDS.toNanos(Long.parseLong(args.getOrDefault("idle-timeout-s", "30")));
        String stateDir = args.getOrDefault("state-dir", Files.createTempDirectory("kstreams-peer-").toString());
        String rekey = appId + "-rekey";
        int inputPartitions = prepareTopics(bootstrap, input, rekey);

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 2);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0L);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);

        KafkaStreams streams = new KafkaStreams(topology(input, output, dlq, rekey, inputPartitions), props);
        CountDownLatch stop = STOP;
        AtomicBoolean failed = new AtomicBoolean(false);
        streams.setUncaughtExceptionHandler(e -> {
            System.err.println("kstreams-peer: stream thread failed: " + e);
            e.printStackTrace();
            failed.set(true);
            stop.countDown();
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setStateListener((now, before) -> {
            status("{\"state\":\"" + now + "\",\"ms\":" + System.currentTimeMillis() + "}");
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.PENDING_ERROR) {
                failed.set(true);
                stop.countDown();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            SIGNALLED.set(true);
            stop.countDown();
            try {
                DONE.await(90, TimeUnit.SECONDS); // the close and the summary line
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        long startNanos = System.nanoTime();
        long startMs = System.currentTimeMillis();
        streams.start();

        boolean announced = false;
        while (!stop.await(20, TimeUnit.MILLISECONDS)) {
            long n = RECORDS.sum();
            long first = FIRST_NANOS.get();
            if (!announced && first != 0) {
                announced = true;
                status("{\"first_record_ms\":" + epochMs(startMs, startNanos, first) + "}");
            }
            if (target > 0 && n >= target) {
                break;
            }
            long since = first == 0 ? startNanos : LAST_NANOS.getOpaque();
            if (idleNanos > 0 && since != 0 && System.nanoTime() - since > idleNanos) {
                status("{\"idle\":true}");
                break;
            }
        }
        long closeStart = System.nanoTime();
        boolean closed = streams.close(Duration.ofSeconds(60));
        long closeNanos = System.nanoTime() - closeStart;
        long n = RECORDS.sum();
        long first = FIRST_NANOS.get();
        long last = LAST_NANOS.getOpaque();
        double seconds = (last - first) / 1e9;
        System.out.println(String.format(Locale.ROOT,
                "{\"records\":%d,\"rejected\":%d,\"rekeyed\":%d,\"first_ms\":%d,\"last_ms\":%d,"
                        + "\"records_per_s\":%.1f,\"close_ms\":%.1f,\"closed\":%b,\"failed\":%b}",
                n, REJECTED.sum(), REKEYED.sum(), first == 0 ? 0 : epochMs(startMs, startNanos, first),
                last == 0 ? 0 : epochMs(startMs, startNanos, last), seconds > 0 ? n / seconds : 0.0,
                closeNanos / 1e6, closed, failed.get()));
        System.out.flush();
        return failed.get() || !closed ? 1 : 0;
    }

    static long epochMs(long startMs, long startNanos, long nanos) {
        return startMs + (nanos - startNanos) / 1_000_000;
    }

    static void status(String line) {
        System.err.println("kstreams-peer: " + line);
    }
}
