package io.streamops.spark;

import java.io.File;
import java.io.FileNotFoundException;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.UUID;
import java.util.stream.Stream;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
import org.apache.hadoop.fs.UnsupportedFileSystemException;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager;

/**
 * Spark's checkpoint files on a local disk, written with java.nio (the session's
 * spark.sql.streaming.checkpointFileManagerClass); any other file system goes to Spark's own
 * managers, chosen as Spark chooses them.
 *
 * <p>Why: without Hadoop's native library, its local file system runs a shell command for each
 * permission change and each symbolic-link check. Spark's default manager (FileContext) ran six
 * of them per checkpoint file (chmod of the temporary file and its checksum, readlink of each
 * before and after the rename): about 40 ms per file, so ~80 ms per micro-batch on the driver
 * (the offsets and commit logs) and as much per state partition and batch on the executors (the
 * state store's changelog file), plus the CPU of forking a large JVM. The contract is Spark's:
 * createAtomic writes a temporary file in the same directory and renames it into place when
 * closed (nothing is visible before, a cancel leaves nothing), refusing to replace an existing
 * file unless asked to. As with Hadoop's local file system, nothing is forced to the disk.
 *
 * <p>Beside each file it writes the checksum file Hadoop's local file system keeps, ".NAME.crc"
 * (Hadoop's format: "crc\0", the bytes per checksum, a CRC-32 per chunk), computed while the file
 * is written, so the files on disk are what Hadoop would write: Hadoop's reads check them, and
 * `streamops verify` finds a state file whose bytes changed. The checksum goes into place after
 * its file (a file with no checksum is read unchecked; a replaced file's old checksum is removed
 * first). Listings leave checksum files out, as Hadoop's does.
 */
public final class LocalCheckpointFileManager implements CheckpointFileManager {
  private final Path root;
  private final CheckpointFileManager delegate; // null: a local path, handled here
  private final FileSystem localFs; // reads (Hadoop's raw local file system: no checksums, no shell)

  public LocalCheckpointFileManager(Path path, Configuration conf) throws IOException {
    String scheme = path.toUri().getScheme();
    if (scheme == null) {
      scheme = FileSystem.getDefaultUri(conf).getScheme();
    }
    if (scheme == null || "file".equals(scheme)) {
      this.localFs = FileSystem.getLocal(conf).getRaw();
      this.root = localFs.makeQualified(path);
      this.delegate = null;
    } else {
      this.localFs = null;
      this.root = path;
      this.delegate = sparksOwn(path, conf);
    }
  }

  /** What CheckpointFileManager.create returns when no class is configured. */
  private static CheckpointFileManager sparksOwn(Path path, Configuration conf) throws IOException {
    try {
      return new FileContextBasedCheckpointFileManager(path, conf);
    } catch (RuntimeException e) {
      throw e;
    } catch (Exception e) { // Scala declares no checked exceptions
      if (e instanceof UnsupportedFileSystemException) {
        return new FileSystemBasedCheckpointFileManager(path, conf);
      }
      throw e instanceof IOException ? (IOException) e : new IOException(e);
    }
  }

  static File file(Path p) {
    return new File(p.toUri().getPath());
  }

  static File checksumOf(File f) {
    return new File(f.getParentFile(), "." + f.getName() + ".crc");
  }

  static boolean isChecksum(String name) {
    return name.startsWith(".") && name.endsWith(".crc");
  }

  @Override
  public CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
    if (delegate != null) {
      return delegate.createAtomic(path, overwriteIfPossible);
    }
    File target = file(path);
    File dir = target.getAbsoluteFile().getParentFile();
    try {
      Files.createDirectories(dir.toPath());
      File temp = new File(dir, "." + target.getName() + "." + UUID.randomUUID() + ".tmp");
      return new AtomicStream(new ChecksummedStream(new FileOutputStream(temp)), temp, target.getAbsoluteFile(),
          overwriteIfPossible);
    } catch (IOException e) {
      throw sneaky(new IOException("cannot create a temporary file for " + path + ": " + e, e));
    }
  }

  /** Hadoop's checksum file format (ChecksumFileSystem): header, bytes per checksum, CRC-32s. */
  static final int BYTES_PER_CHECKSUM = 512;
  static final byte[] CHECKSUM_HEADER = {'c', 'r', 'c', 0};

  /** A file's bytes, with a CRC-32 per BYTES_PER_CHECKSUM of them. */
  static final class ChecksummedStream extends java.io.FilterOutputStream {
    private final java.util.zip.CRC32 crc = new java.util.zip.CRC32();
    private final java.io.ByteArrayOutputStream sums = new java.io.ByteArrayOutputStream();
    private int inChunk;

    ChecksummedStream(OutputStream out) {
      super(out);
    }

    @Override
    public void write(int b) throws IOException {
      out.write(b);
      crc.update(b);
      if (++inChunk == BYTES_PER_CHECKSUM) {
        endChunk();
      }
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
      out.write(b, off, len);
      while (len > 0) {
        int n = Math.min(len, BYTES_PER_CHECKSUM - inChunk);
        crc.update(b, off, n);
        off += n;
        len -= n;
        inChunk += n;
        if (inChunk == BYTES_PER_CHECKSUM) {
          endChunk();
        }
      }
    }

    private void endChunk() {
      long v = crc.getValue();
      sums.write((int) (v >>> 24));
      sums.write((int) (v >>> 16));
      sums.write((int) (v >>> 8));
      sums.write((int) v);
      crc.reset();
      inChunk = 0;
    }

    /** The checksum file's bytes (call once the data is complete). */
    byte[] checksumFile() {
      if (inChunk > 0) {
        endChunk();
      }
      java.nio.ByteBuffer buf = java.nio.ByteBuffer.allocate(8 + sums.size());
      buf.put(CHECKSUM_HEADER).putInt(BYTES_PER_CHECKSUM).put(sums.toByteArray());
      return buf.array();
    }
  }

  /** Renamed into place on close, with its checksum file; deleted on cancel. */
  static final class AtomicStream extends CancellableFSDataOutputStream {
    private final ChecksummedStream out;
    private final File temp;
    private final File target;
    private final boolean overwrite;
    private boolean done;

    AtomicStream(ChecksummedStream out, File temp, File target, boolean overwrite) {
      super(out);
      this.out = out;
      this.temp = temp;
      this.target = target;
      this.overwrite = overwrite;
    }

    @Override
    public synchronized void close() throws IOException {
      if (done) {
        return;
      }
      done = true;
      try {
        super.close(); // flushes and closes the file
        commit();
      } catch (IOException | RuntimeException e) {
        Files.deleteIfExists(temp.toPath());
        throw e;
      }
    }

    private void commit() throws IOException {
      File sum = checksumOf(target);
      if (overwrite) {
        Files.deleteIfExists(sum.toPath()); // the old bytes' checksum would fail Hadoop's reads of the new
        replace(temp, target);
      } else {
        try { // a hard link fails if the target exists, atomically: a concurrent writer loses
          Files.createLink(target.toPath(), temp.toPath());
        } catch (java.nio.file.FileAlreadyExistsException e) {
          throw new FileAlreadyExistsException("Failed to rename " + temp + " to " + target
              + " as destination already exists");
        } finally {
          Files.deleteIfExists(temp.toPath());
        }
      }
      File sumTemp = new File(sum.getParentFile(), sum.getName() + "." + UUID.randomUUID() + ".tmp");
      Files.write(sumTemp.toPath(), out.checksumFile());
      replace(sumTemp, sum);
    }

    private static void replace(File from, File to) throws IOException {
      try {
        Files.move(from.toPath(), to.toPath(), StandardCopyOption.ATOMIC_MOVE);
      } catch (AtomicMoveNotSupportedException e) {
        Files.move(from.toPath(), to.toPath(), StandardCopyOption.REPLACE_EXISTING);
      }
    }

    @Override
    public synchronized void cancel() {
      if (done) {
        return;
      }
      done = true;
      try {
        out.close();
      } catch (IOException ignored) {
        // the file is deleted below either way
      }
      try {
        Files.deleteIfExists(temp.toPath());
      } catch (IOException ignored) {
        // a temporary file left over is never read (its name is not a checkpoint file's)
      }
    }
  }

  @Override
  public FSDataInputStream open(Path path) {
    if (delegate != null) {
      return delegate.open(path);
    }
    try {
      return localFs.open(path);
    } catch (IOException e) {
      throw sneaky(e);
    }
  }

  @Override
  public FileStatus[] list(Path path, PathFilter filter) {
    if (delegate != null) {
      return delegate.list(path, filter);
    }
    File dir = file(path);
    String[] names = dir.list();
    if (names == null) {
      throw sneaky(new FileNotFoundException("File " + path + " does not exist"));
    }
    Path qualified = localFs.makeQualified(path);
    List<FileStatus> out = new ArrayList<>();
    for (String name : names) {
      if (isChecksum(name)) {
        continue;
      }
      Path child = new Path(qualified, name);
      if (filter != null && !filter.accept(child)) {
        continue;
      }
      File f = new File(dir, name);
      if (!f.exists()) {
        continue; // deleted since the listing
      }
      out.add(new FileStatus(f.isDirectory() ? 0 : f.length(), f.isDirectory(), 1, 32 * 1024 * 1024,
          f.lastModified(), child));
    }
    return out.toArray(new FileStatus[0]);
  }

  @Override
  public void mkdirs(Path path) {
    if (delegate != null) {
      delegate.mkdirs(path);
      return;
    }
    try {
      Files.createDirectories(file(path).toPath());
    } catch (IOException e) {
      throw sneaky(e);
    }
  }

  @Override
  public boolean exists(Path path) {
    if (delegate != null) {
      return delegate.exists(path);
    }
    return file(path).exists();
  }

  @Override
  public void delete(Path path) {
    if (delegate != null) {
      delegate.delete(path);
      return;
    }
    File f = file(path);
    try {
      if (f.isDirectory()) {
        try (Stream<java.nio.file.Path> walk = Files.walk(f.toPath())) {
          for (java.nio.file.Path p : (Iterable<java.nio.file.Path>) walk.sorted(Comparator.reverseOrder())::iterator) {
            Files.deleteIfExists(p);
          }
        }
      } else {
        Files.deleteIfExists(f.toPath());
      }
      Files.deleteIfExists(checksumOf(f).toPath());
    } catch (IOException e) {
      throw sneaky(e);
    }
  }

  @Override
  public boolean isLocal() {
    return delegate == null || delegate.isLocal();
  }

  @Override
  public Path createCheckpointDirectory() {
    if (delegate != null) {
      return delegate.createCheckpointDirectory();
    }
    mkdirs(root);
    return root;
  }

  /** Spark's managers are Scala: their callers catch IOException though no signature declares it. */
  @SuppressWarnings("unchecked")
  private static <E extends Throwable> RuntimeException sneaky(Throwable e) throws E {
    throw (E) e;
  }
}
