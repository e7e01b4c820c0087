package tablestore.spark.jvm;

import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;

/**
 * A streaming write that forwards every call to the Python data source's streaming write it wraps; a subclass
 * overrides what it changes (how tasks write, who commits, what follows a commit), as {@link DelegatingBatchWrite}
 * does for batch writes.
 */
public abstract class DelegatingStreamingWrite implements StreamingWrite {
    /** The Python data source's streaming write (or another wrapper of it). */
    protected final StreamingWrite python;

    protected DelegatingStreamingWrite(StreamingWrite python) {
        this.python = python;
    }

    @Override
    public StreamingDataWriterFactory createStreamingWriterFactory(PhysicalWriteInfo info) {
        return python.createStreamingWriterFactory(info);
    }

    @Override
    public boolean useCommitCoordinator() {
        return python.useCommitCoordinator();
    }

    @Override
    public void commit(long epochId, WriterCommitMessage[] messages) {
        python.commit(epochId, messages);
    }

    @Override
    public void abort(long epochId, WriterCommitMessage[] messages) {
        python.abort(epochId, messages);
    }

    @Override
    public String toString() {
        return python.toString();
    }
}
