package tablestore.spark.jvm;

import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.WriterCommitMessage;

/**
 * A batch write that changes how its tasks write ({@link #createBatchWriterFactory}) and leaves the job's protocol
 * to the Python data source's batch write it wraps: the commit coordinator, each task's commit message, the job's
 * commit (one snapshot) and abort (the files deleted) are Python's. A task that met a tablestore error commits
 * its line instead ({@link TaskErrors}): the commit throws it, and Python's abort never sees it.
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
        if (!(message instanceof TaskErrors.Failed)) {
            python.onDataWriterCommit(message);
        }
    }

    @Override
    public void commit(WriterCommitMessage[] messages) {
        TaskErrors.throwIfFailed(messages);   // a task met a tablestore error: its line is the job's error
        python.commit(messages);
    }

    @Override
    public void abort(WriterCommitMessage[] messages) {
        python.abort(TaskErrors.withoutFailed(messages));
    }

    @Override
    public String toString() {
        return python.toString();
    }
}
