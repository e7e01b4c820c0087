/**
 * The JVM twins of rules that Python owns: the key bytes ({@link tablestore.spark.jvm.mirror.KeyEncoder}), the
 * bucket of a key ({@link tablestore.spark.jvm.mirror.BucketFunction}), a data file of the file store's format
 * ({@link tablestore.spark.jvm.mirror.DataFileOut}), a primary key's history in the upsert materializer
 * ({@link tablestore.spark.jvm.mirror.History}), a deletion vector's bytes
 * ({@link tablestore.spark.jvm.mirror.DeletionVector}) and the names the two sides share (the generated {@code Contract}).
 * The jar implements these again for speed; Python's module stays the reference, and tests hold the two to the same
 * results (golden vectors, differential tests).
 *
 * <p>Each class begins its class comment with the Python module it follows, in one form ("Python owner:", then the
 * file in {@code {@code ...}} and a full stop, e.g. for BucketFunction {@code filestore/bucket.py}), so that a change
 * to a Python rule finds its twin here and nowhere else. tests/test_architecture.py checks that every class here
 * names a file that exists, and that no class outside this package claims a Python owner.
 *
 * <p>The jar's lowest layer: a class here uses nothing else of the jar (only Spark, Parquet and the JDK), so a twin
 * reads as a translation of its Python module alone, and every other package may use it.
 */
package tablestore.spark.jvm.mirror;
