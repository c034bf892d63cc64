package io.streamops.spark;

import java.io.Serializable;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A batch write of Kafka records in one Kafka transaction per task (issue 39, item 3): called from
 * foreachBatch as {@code df.write.format("io.streamops.spark.TransactionalKafkaSink")
 * .option("batch.id", N)...mode("append").save()} with rows (topic string, [partition int,] key binary,
 * value binary, headers array<struct<key string, value binary>>); a null or absent partition is the
 * producer's choice.
 *
 * <p>Why in the JVM: a task's transactional producer must outlive the task, and the next batch's task
 * of the same partition must find it; Python workers are handed out with no tie to a partition, an
 * executor's JVM is one per executor, and the state store coordinator keeps a partition's tasks on
 * one executor. So producers live in a static cache keyed by transactional id, checked out by one
 * task at a time.
 *
 * <p>Exactly once per (batch, partition): each partition's transaction also commits the batch id as the
 * offset of the partition's own consumer group on the marker topic (no metadata: confluent-kafka's
 * Python client cannot read it back). A task reads
 * it (read_committed: the fetch waits for a pending transaction) after initTransactions, which fences
 * any earlier attempt and settles its transaction, and writes nothing for a batch already committed.
 */
public class TransactionalKafkaSink implements TableProvider {
  private static final Logger LOG = LoggerFactory.getLogger(TransactionalKafkaSink.class);

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    throw new UnsupportedOperationException("TransactionalKafkaSink takes the DataFrame's schema");
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new SinkTable(schema);
  }

  static final class SinkTable implements Table, SupportsWrite {
    private final StructType schema;

    SinkTable(StructType schema) {
      this.schema = schema;
    }

    @Override
    public String name() {
      return "streamops-transactional-kafka";
    }

    @Override
    public StructType schema() {
      return schema;
    }

    @Override
    public Set<TableCapability> capabilities() {
      return EnumSet.of(TableCapability.BATCH_WRITE, TableCapability.ACCEPT_ANY_SCHEMA);
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
      Options options = Options.of(info.options(), info.schema());
      return new WriteBuilder() {
        @Override
        public Write build() {
          return new Write() {
            @Override
            public BatchWrite toBatch() {
              return new TxBatchWrite(options);
            }
          };
        }
      };
    }
  }

  /** What every task needs, serialized to the executors. */
  static final class Options implements Serializable {
    final Map<String, String> kafka = new HashMap<>();
    String transactionalIdPrefix;
    String markerTopic;
    String markerGroupPrefix;
    long batchId;
    long timeoutMs;
    int topic = -1;
    int partition = -1;
    int key = -1;
    int value = -1;
    int headers = -1;

    static Options of(CaseInsensitiveStringMap map, StructType schema) {
      Options o = new Options();
      for (Map.Entry<String, String> e : map.asCaseSensitiveMap().entrySet()) {
        if (e.getKey().startsWith("kafka.")) {
          o.kafka.put(e.getKey().substring("kafka.".length()), e.getValue());
        }
      }
      o.transactionalIdPrefix = required(map, "transactional.id.prefix");
      o.markerTopic = required(map, "marker.topic");
      o.markerGroupPrefix = required(map, "marker.group.prefix");
      o.batchId = Long.parseLong(required(map, "batch.id"));
      o.timeoutMs = Long.parseLong(map.getOrDefault("timeout.ms", "60000"));
      String[] names = schema.fieldNames();
      for (int i = 0; i < names.length; i++) {
        switch (names[i]) {
          case "topic": o.topic = i; break;
          case "partition": o.partition = i; break;
          case "key": o.key = i; break;
          case "value": o.value = i; break;
          case "headers": o.headers = i; break;
          default: break;
        }
      }
      if (o.topic < 0 || o.value < 0) {
        throw new IllegalArgumentException("rows need a topic (string) and a value (binary) column");
      }
      return o;
    }

    private static String required(CaseInsensitiveStringMap map, String name) {
      String v = map.get(name);
      if (v == null) {
        throw new IllegalArgumentException("option " + name + " is required");
      }
      return v;
    }
  }

  /** One partition's result: its records, or that its batch was committed before (skipped). */
  public static final class Committed implements WriterCommitMessage {
    public final int partition;
    public final long records;
    public final boolean skipped;

    Committed(int partition, long records, boolean skipped) {
      this.partition = partition;
      this.records = records;
      this.skipped = skipped;
    }
  }

  static final class TxBatchWrite implements BatchWrite {
    private final Options options;

    TxBatchWrite(Options options) {
      this.options = options;
    }

    @Override
    public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
      return new Factory(options);
    }

    @Override
    public void commit(WriterCommitMessage[] messages) {
      // each partition committed its own transaction; the caller records the batch
    }

    @Override
    public void abort(WriterCommitMessage[] messages) {
      // a partition that did not commit aborted its own transaction
    }
  }

  static final class Factory implements DataWriterFactory {
    private final Options options;

    Factory(Options options) {
      this.options = options;
    }

    @Override
    public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
      return new TxWriter(options, partitionId);
    }
  }

  /** A producer with its transactional id, and the last batch it knows committed for its partition. */
  static final class Held {
    final KafkaProducer<byte[], byte[]> producer;
    long lastCommitted;

    Held(KafkaProducer<byte[], byte[]> producer, long lastCommitted) {
      this.producer = producer;
      this.lastCommitted = lastCommitted;
    }
  }

  /** The executor's producers, by transactional id; a task takes one out and puts it back. */
  static final ConcurrentHashMap<String, Held> PRODUCERS = new ConcurrentHashMap<>();

  static long lastCommitted(Options o, String group, TopicPartition marker) {
    Properties p = new Properties();
    p.putAll(o.kafka);
    p.put("group.id", group);
    p.put("enable.auto.commit", "false");
    p.put("isolation.level", "read_committed");
    p.put("key.deserializer", ByteArrayDeserializer.class.getName());
    p.put("value.deserializer", ByteArrayDeserializer.class.getName());
    try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
      Map<TopicPartition, OffsetAndMetadata> got =
          c.committed(Collections.singleton(marker), Duration.ofMillis(o.timeoutMs));
      OffsetAndMetadata m = got.get(marker);
      return m == null ? -1L : m.offset();
    }
  }

  static final class TxWriter implements DataWriter<InternalRow> {
    private final Options o;
    private final int partition;
    private final String txId;
    private final String group;
    private final TopicPartition marker;
    private Held held;
    private boolean skip;
    private boolean open;
    private long records;

    TxWriter(Options o, int partition) {
      this.o = o;
      this.partition = partition;
      this.txId = o.transactionalIdPrefix + "-p" + partition;
      this.group = o.markerGroupPrefix + "-p" + partition;
      this.marker = new TopicPartition(o.markerTopic, 0);
      Held cached = PRODUCERS.remove(txId);
      held = cached != null ? cached : fresh("this executor had none for it");
      skip = o.batchId <= held.lastCommitted;  // only this producer's own commits raised it: true
      if (skip) {
        return;
      }
      try {
        begin();
      } catch (KafkaException e) {
        if (cached == null) {
          drop();
          throw e;
        }
        // The cached producer was fenced: the partition ran on another executor since, whose new
        // producer fenced this one and may have committed batches. Found here, before any row is
        // consumed, instead of at the commit, where it failed the task and its retry recomputed the
        // partition (and reloaded its state): a new producer fences that one, and its marker is the truth.
        drop();
        held = fresh("the one this executor had was fenced: " + e.getClass().getSimpleName());
        skip = o.batchId <= held.lastCommitted;
        if (!skip) {
          try {
            begin();
          } catch (KafkaException again) {
            drop();
            throw again;
          }
        }
      }
    }

    /** A new producer for txId: initTransactions fences an earlier holder and settles its
     * transaction, so the marker read next is the truth. */
    private Held fresh(String why) {
      Properties p = new Properties();
      p.putAll(o.kafka);
      p.put("transactional.id", txId);
      p.put("enable.idempotence", "true");
      p.put("key.serializer", ByteArraySerializer.class.getName());
      p.put("value.serializer", ByteArraySerializer.class.getName());
      KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
      try {
        producer.initTransactions();
        Held h = new Held(producer, lastCommitted(o, group, marker));
        LOG.info("{}: a new transactional producer ({}); its last committed batch {}", txId, why, h.lastCommitted);
        return h;
      } catch (RuntimeException e) {
        producer.close(Duration.ZERO);
        throw e;
      }
    }

    /** The partition's transaction begun, with the batch as its marker group's offset: the first call
     * that reaches the broker (the group coordinator), so a fenced producer fails here. */
    private void begin() {
      held.producer.beginTransaction();
      open = true;
      Map<TopicPartition, OffsetAndMetadata> offsets =
          Collections.singletonMap(marker, new OffsetAndMetadata(o.batchId));
      held.producer.sendOffsetsToTransaction(offsets, new ConsumerGroupMetadata(group));
    }

    @Override
    public void write(InternalRow row) {
      if (skip) {
        return;
      }
      String topic = row.getUTF8String(o.topic).toString();
      byte[] key = o.key >= 0 && !row.isNullAt(o.key) ? row.getBinary(o.key) : null;
      byte[] value = row.isNullAt(o.value) ? null : row.getBinary(o.value);
      List<org.apache.kafka.common.header.Header> headers = new ArrayList<>();
      if (o.headers >= 0 && !row.isNullAt(o.headers)) {
        ArrayData hs = row.getArray(o.headers);
        for (int i = 0; i < hs.numElements(); i++) {
          InternalRow h = hs.getStruct(i, 2);
          headers.add(new RecordHeader(h.getUTF8String(0).toString(), h.isNullAt(1) ? null : h.getBinary(1)));
        }
      }
      // a given partition is the one the driver's producer would pick (librdkafka's partitioner)
      Integer part = o.partition >= 0 && !row.isNullAt(o.partition) ? row.getInt(o.partition) : null;
      held.producer.send(new ProducerRecord<>(topic, part, key, value, headers));
      records++;
    }

    @Override
    public WriterCommitMessage commit() {
      if (skip) {
        release();
        return new Committed(partition, 0, true);
      }
      try {
        held.producer.commitTransaction();  // with the marker sent at the start (begin)
      } catch (KafkaException e) {
        drop();
        throw e;
      }
      open = false;
      held.lastCommitted = o.batchId;
      release();
      return new Committed(partition, records, false);
    }

    @Override
    public void abort() {
      if (held == null) {
        return;
      }
      if (open) {
        try {
          held.producer.abortTransaction();
          open = false;
        } catch (KafkaException e) {
          drop();  // fenced or broken: the next task of this partition starts a new one
          return;
        }
      }
      release();
    }

    @Override
    public void close() {
      if (held != null && open) {
        abort();
      }
    }

    private void release() {
      if (held != null) {
        Held other = PRODUCERS.putIfAbsent(txId, held);
        if (other != null) {  // another attempt made its own meanwhile (and fenced this one)
          held.producer.close(Duration.ZERO);
        }
        held = null;
      }
    }

    private void drop() {
      if (held != null) {
        held.producer.close(Duration.ZERO);
        held = null;
      }
      open = false;
    }
  }
}
