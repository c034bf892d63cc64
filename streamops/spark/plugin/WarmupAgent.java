package io.streamops.spark;

import java.io.File;
import java.lang.instrument.Instrumentation;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * Java agent (-javaagent:JAR=NICE on executors): the executor JVM starts at a lower CPU priority,
 * so that its start and warm-up use the CPU the running query leaves free instead of slowing its
 * batches (on a small machine a new executor's JIT and class loading took cores from the running
 * one). WarmupPlugin raises it back before the executor runs a task of the query. Only where it
 * can be raised again (root or CAP_SYS_NICE) and with renice(1) on the PATH; no Spark class is
 * needed here.
 */
public final class WarmupAgent {
  private static volatile int loweredFrom = Integer.MIN_VALUE; // the nice value before premain

  private WarmupAgent() {}

  public static void premain(String args, Instrumentation inst) {
    try {
      int nice = args == null || args.isEmpty() ? 10 : Integer.parseInt(args.trim());
      if (!canRaisePriority() || !new File("/proc/self/task").isDirectory()) {
        return;
      }
      int before = currentNice();
      if (renice(nice)) {
        loweredFrom = before;
      }
    } catch (Throwable e) {
      System.err.println("streamops warm-up: priority not lowered: " + e);
    }
  }

  public static boolean lowered() {
    return loweredFrom != Integer.MIN_VALUE;
  }

  /** Back to the priority from before premain (once; a no-op when it was never lowered). */
  public static synchronized void restorePriority() {
    if (loweredFrom != Integer.MIN_VALUE) {
      int to = loweredFrom;
      loweredFrom = Integer.MIN_VALUE;
      renice(to);
    }
  }

  /** Root, or the CAP_SYS_NICE capability (bit 23 of CapEff): a lowered priority can be raised. */
  static boolean canRaisePriority() {
    try (Stream<String> lines = Files.lines(Path.of("/proc/self/status"))) {
      for (String line : (Iterable<String>) lines::iterator) {
        if (line.startsWith("Uid:") && line.split("\\s+")[2].equals("0")) {
          return true;
        }
        if (line.startsWith("CapEff:")) {
          long caps = Long.parseUnsignedLong(line.split("\\s+")[1], 16);
          if ((caps & (1L << 23)) != 0) {
            return true;
          }
        }
      }
    } catch (Exception e) {
      return false;
    }
    return false;
  }

  static int currentNice() throws Exception {
    String stat = Files.readString(Path.of("/proc/self/stat"));
    String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
    return Integer.parseInt(fields[16]); // field 19 of stat: nice
  }

  /** Set the nice value of every thread of this JVM and of its child processes (Python workers). */
  static boolean renice(int nice) {
    List<String> cmd = new ArrayList<>(List.of("renice", "-n", Integer.toString(nice), "-p"));
    List<ProcessHandle> procs = new ArrayList<>();
    procs.add(ProcessHandle.current());
    ProcessHandle.current().descendants().forEach(procs::add);
    for (ProcessHandle p : procs) {
      File[] tasks = new File("/proc/" + p.pid() + "/task").listFiles();
      if (tasks != null) {
        for (File t : tasks) {
          cmd.add(t.getName());
        }
      }
    }
    try {
      Process proc = new ProcessBuilder(cmd).redirectErrorStream(true)
          .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
      return proc.waitFor(5, TimeUnit.SECONDS) && proc.exitValue() == 0;
    } catch (Exception e) {
      return false;
    }
  }

}
