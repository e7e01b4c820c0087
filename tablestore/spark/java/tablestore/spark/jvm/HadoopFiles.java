package tablestore.spark.jvm;

import java.io.IOException;
import java.util.HashMap;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.SparkEnv;
import org.apache.spark.deploy.SparkHadoopUtil;

import tablestore.spark.jvm.mirror.Contract;

/**
 * The data files the JVM reads and writes outside the local file system: a warehouse on S3, through Hadoop's S3A
 * (tablestore/spark/s3a.py puts hadoop-aws on the class path of a session whose warehouse is on S3).
 *
 * <p>Python hands the JVM {@code s3a://} URLs and the S3A settings of the table's catalog options (the plans' {@code
 * "hadoop"}: {@code fs.s3a.endpoint}, ...): a read or write given its S3 options per DataFrame reaches its bucket
 * even when the session's own Hadoop settings do not. Python does so only when the scan's or write's options carry
 * {@value #JVM_S3A_OPTION} = true, which {@link #markS3a} sets where S3A is on this JVM's class path.
 */
public final class HadoopFiles {
    /** tablestore/spark/s3a.py's JVM_S3A_OPTION. */
    public static final String JVM_S3A_OPTION = Contract.JVM_S3A_OPTION;
    private static final String S3A_CLASS = "org.apache.hadoop.fs.s3a.S3AFileSystem";
    private static volatile Boolean s3a;

    private HadoopFiles() {
    }

    /** Whether S3A is on this JVM's class path (the session's jars included). */
    public static boolean s3a() {
        if (s3a == null) {
            boolean found;
            try {
                Class.forName(S3A_CLASS, false, Thread.currentThread().getContextClassLoader());
                found = true;
            } catch (ClassNotFoundException | LinkageError e) {
                found = false;
            }
            s3a = found;
        }
        return s3a;
    }

    /** {@code options} with {@value #JVM_S3A_OPTION} = true when this JVM reads and writes {@code s3a://}. */
    public static Map<String, String> markS3a(Map<String, String> options) {
        if (s3a()) {
            options.put(JVM_S3A_OPTION, "true");
        }
        return options;
    }

    /** Whether {@code file} is a URL of a file system other than the local one ({@code s3a://b/k}). */
    public static boolean remote(String file) {
        int at = file.indexOf("://");
        return at > 0 && !file.startsWith("file:");
    }

    /** A plan's {@code "hadoop"} object as a map (serializable, for the tasks). */
    public static HashMap<String, String> settings(com.fasterxml.jackson.databind.JsonNode hadoop) {
        HashMap<String, String> out = new HashMap<>();
        if (hadoop != null) {
            hadoop.fields().forEachRemaining(e -> out.put(e.getKey(), e.getValue().asText()));
        }
        return out;
    }

    /** This process's Hadoop configuration (the session's {@code spark.hadoop.*}) with {@code settings} over it. */
    public static Configuration configuration(Map<String, String> settings) {
        SparkEnv env = SparkEnv.get();
        Configuration conf = env != null ? SparkHadoopUtil.get().newConfiguration(env.conf()) : new Configuration();
        settings.forEach(conf::set);
        return conf;
    }

    /**
     * The file system of {@code file}, opened with {@link #configuration}. Hadoop caches file systems per scheme,
     * bucket and user: a reader that opens {@code file} later with a configuration of its own (Spark's vectorized
     * Parquet reader opens a path with a bare {@code new Configuration()}) gets this one, with its endpoint and
     * credentials.
     */
    public static FileSystem open(String file, Map<String, String> settings) throws IOException {
        return new Path(file).getFileSystem(configuration(settings));
    }
}
