package tablestore.spark.jvm.write;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import tablestore.spark.jvm.mirror.BucketFunction;

/**
 * The JVM writer of a task whose rows Spark did not shuffle by bucket (the table option
 * {@code sink.shuffle-by-bucket} = false): each row goes to its bucket ({@link BucketFunction}, the JVM twin of
 * filestore/bucket.py) and the bucket's {@link BucketRunWriter} of this task, which numbers it in the task's stride
 * of that bucket, as Python's writer numbers a task's rows of any bucket (tablestore/spark/write.py). The buckets
 * share write-buffer-size: when their buffered rows pass it, the bucket holding the most is written as a sorted run
 * (as Paimon's writers share a memory pool), so a task holds at most one buffer's worth whatever the bucket count.
 */
final class BucketFanOut implements DataWriter<InternalRow> {
    private final WritePlan plan;
    private final StructType input;
    private final int task;
    private final BucketFunction.Bound buckets;
    private final int keyOrdinal;
    private final DataType keyType;
    private final GenericInternalRow key = new GenericInternalRow(1);
    private final BucketRunWriter[] writers;
    private final List<BucketRunWriter> opened = new ArrayList<>();
    private long buffered;   // the writers' buffered() summed

    BucketFanOut(WritePlan plan, StructType input, int task, BucketFunction function) {
        this.plan = plan;
        this.input = input;
        this.task = task;
        this.keyOrdinal = plan.ordinals[plan.key];
        StructField field = input.fields()[keyOrdinal];
        this.keyType = field.dataType();
        this.buckets = (BucketFunction.Bound) function.bind(DataTypes.createStructType(new StructField[]{field}));
        this.writers = new BucketRunWriter[plan.bucketDirs.length];
    }

    @Override
    public void write(InternalRow row) throws IOException {
        int bucket = 0;
        if (writers.length > 1) {
            key.update(0, row.isNullAt(keyOrdinal) ? null : row.get(keyOrdinal, keyType));
            bucket = key.isNullAt(0) ? 0 : buckets.bucket(key);   // a null key: its writer refuses the row
        }
        BucketRunWriter writer = writers[bucket];
        if (writer == null) {
            writer = new BucketRunWriter(plan, input, task, bucket);
            writers[bucket] = writer;
            opened.add(writer);
        }
        long before = writer.buffered();
        writer.write(row);   // which writes its own run when it alone holds write-buffer-size
        buffered += writer.buffered() - before;
        if (buffered >= plan.writeBufferSize) {
            BucketRunWriter largest = opened.get(0);
            for (BucketRunWriter w : opened) {
                largest = w.buffered() > largest.buffered() ? w : largest;
            }
            buffered -= largest.buffered();
            largest.flush();
        }
    }

    @Override
    public WriterCommitMessage commit() throws IOException {
        for (BucketRunWriter w : opened) {
            w.flush();
        }
        return TaskCommits.of(task, opened);
    }

    @Override
    public void abort() throws IOException {
        for (BucketRunWriter w : opened) {
            w.abort();
        }
    }

    @Override
    public void close() {
        for (BucketRunWriter w : opened) {
            w.close();
        }
    }
}
