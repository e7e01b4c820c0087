package tablestore.spark.jvm;

import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.WriterCommitMessage;

/**
 * A batch write that changes how its tasks write ({@link #createBatchWriterFactory}) and leaves the job's protocol
 * to the Python data source's batch write it wraps: the commit coordinator, each task's commit message, the job's
 * commit (one snapshot) and abort (the files deleted) are Python's.
 */
public abstract class DelegatingBatchWrite implements BatchWrite {
    /** The Python data source's batch write. */
    protected final BatchWrite python;

    protected DelegatingBatchWrite(BatchWrite python) {
        this.python = python;
    }

    @Override
    public boolean useCommitCoordinator() {
        return python.useCommitCoordinator();
    }

    @Override
    public void onDataWriterCommit(WriterCommitMessage message) {
        python.onDataWriterCommit(message);
    }

    @Override
    public void commit(WriterCommitMessage[] messages) {
        python.commit(messages);
    }

    @Override
    public void abort(WriterCommitMessage[] messages) {
        python.abort(messages);
    }

    @Override
    public String toString() {
        return python.toString();
    }
}
