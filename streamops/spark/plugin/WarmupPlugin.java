package io.streamops.spark;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collections;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.spark.SparkContext;
import org.apache.spark.TaskContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;

/**
 * Holds a new executor out of task scheduling until the driver has warmed it up.
 *
 * <p>An executor gets no task before it reports LaunchedExecutor, which it does only after its
 * plugins' init() returns. While the driver is "armed" (a live scale-out is under way), init()
 * asks the driver whether it may go on and waits until the driver releases it: by then a
 * warm-up job pinned to this executor is queued ahead of the streaming query, so the query's
 * tasks only reach the executor once its JVM and Python workers are warm (the idea of Kafka
 * Streams' warm-up replicas, KIP-441). Executors that register while the driver is not armed
 * (the app's start, a replacement for a lost one) go on at once, as does any executor after
 * spark.streamops.warmup.holdMs.
 *
 * <p>The driver's Python side drives it through py4j: arm(), held(), release().
 *
 * <p>With WarmupAgent on the executors, the priority the agent lowered is back to normal once the
 * driver says the executor's warm-up is over (warmed()), or at once when it is not held.
 */
public class WarmupPlugin implements SparkPlugin {
  private static final Set<String> HELD = ConcurrentHashMap.newKeySet();
  private static final Set<String> RELEASED = ConcurrentHashMap.newKeySet();
  private static final Set<String> WARM = ConcurrentHashMap.newKeySet();
  /** Executor side: this JVM was held and waits for the driver to say its warm-up is over. */
  private static volatile boolean awaitingWarm = false;
  private static volatile boolean armed = false;
  /** The pool of the driver's warm-up jobs (streamops.spark.warmup_plugin.POOL). */
  static final String POOL = "streamops-warmup";

  /** Hold executors that register from now on (true), or let every held one go (false). */
  public static void arm(boolean on) {
    armed = on;
    if (!on) {
      RELEASED.addAll(HELD);
      WARM.addAll(HELD);
    }
  }

  public static boolean armed() {
    return armed;
  }

  /** Executors waiting in init() for their release. */
  public static String[] held() {
    return HELD.stream().filter(e -> !RELEASED.contains(e)).sorted().toArray(String[]::new);
  }

  public static void release(String executorId) {
    RELEASED.add(executorId);
  }

  /** The warm-up of a held executor is over (done or given up): it may run at full priority. */
  public static void warmed(String executorId) {
    WARM.add(executorId);
  }

  @Override
  public DriverPlugin driverPlugin() {
    return new DriverPlugin() {
      @Override
      public Map<String, String> init(SparkContext sc, PluginContext ctx) {
        return Collections.emptyMap();
      }

      @Override
      public Object receive(Object message) {
        String[] parts = String.valueOf(message).split(":", 2);
        String id = parts.length > 1 ? parts[1] : "";
        if (parts[0].equals("hello")) {
          if (!armed) {
            return "go";
          }
          HELD.add(id);
          return "wait";
        }
        if (parts[0].equals("warm")) {
          return WARM.contains(id) || !HELD.contains(id) ? "yes" : "no";
        }
        return RELEASED.contains(id) || !HELD.contains(id) ? "go" : "wait";
      }
    };
  }

  @Override
  public ExecutorPlugin executorPlugin() {
    return new ExecutorPlugin() {
      @Override
      public void init(PluginContext ctx, Map<String, String> extraConf) {
        long holdMs = ctx.conf().getLong("spark.streamops.warmup.holdMs", 60000L);
        String id = ctx.executorID();
        long deadline = System.currentTimeMillis() + holdMs;
        try {
          Object answer = ctx.ask("hello:" + id);
          boolean held = "wait".equals(answer);
          if (held) {
            warmNative();
          }
          else {
            WarmupAgent.restorePriority(); // not part of a scale-out: run at full priority from now on
          }
          while ("wait".equals(answer) && System.currentTimeMillis() < deadline) {
            Thread.sleep(50);
            answer = ctx.ask("ready:" + id);
          }
          // a held executor stays niced until its whole warm-up is over, even if a task of the
          // query lands on it meanwhile (at full priority its warm-up would take the CPU the
          // query's other executors need); never for longer than the hold plus two minutes
          awaitingWarm = held && WarmupAgent.lowered();
          long until = System.currentTimeMillis() + holdMs + 120_000L;
          Thread priority = new Thread(() -> {
            try {
              while (awaitingWarm && System.currentTimeMillis() < until && !"yes".equals(ctx.ask("warm:" + id))) {
                Thread.sleep(200);
              }
            } catch (InterruptedException e) {
              return;
            } catch (Exception e) {
              System.err.println("streamops warm-up: " + e);
            } finally {
              awaitingWarm = false;
              WarmupAgent.restorePriority();
            }
          }, "streamops-warmup-priority");
          priority.setDaemon(true);
          priority.start();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        } catch (Exception e) {
          // the driver is unreachable or has no plugin: go on unwarmed rather than never start
          System.err.println("streamops warm-up: " + e);
          WarmupAgent.restorePriority();
        }
      }

      @Override
      public void onTaskStart() {
        if (!WarmupAgent.lowered() || awaitingWarm) {
          return;
        }
        TaskContext task = TaskContext.get();
        String pool = task == null ? null : task.getLocalProperty("spark.scheduler.pool");
        if (!POOL.equals(pool)) {
          WarmupAgent.restorePriority(); // the query's first task here: full priority
        }
      }
    };
  }

  /** Load RocksDB's native library and touch its JNI code (the state store's first open). */
  static void warmNative() {
    try {
      Class<?> rocks = Class.forName("org.rocksdb.RocksDB");
      rocks.getMethod("loadLibrary").invoke(null);
      Path dir = Files.createTempDirectory("streamops-warmup-rocksdb");
      Class<?> options = Class.forName("org.rocksdb.Options");
      Object opts = options.getConstructor().newInstance();
      options.getMethod("setCreateIfMissing", boolean.class).invoke(opts, true);
      Object db = rocks.getMethod("open", options, String.class).invoke(null, opts, dir.toString());
      rocks.getMethod("put", byte[].class, byte[].class).invoke(db, new byte[] {1}, new byte[] {2});
      rocks.getMethod("get", byte[].class).invoke(db, (Object) new byte[] {1});
      rocks.getMethod("close").invoke(db);
      options.getMethod("close").invoke(opts);
      try (var files = Files.walk(dir)) {
        files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    } catch (Throwable e) {
      System.err.println("streamops warm-up: RocksDB not warmed: " + e);
    }
  }
}
