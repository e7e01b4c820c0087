package tablestore.spark.jvm.catalog;

import org.apache.spark.sql.SparkSessionExtensions;

import scala.runtime.BoxedUnit;

/** {@code spark.sql.extensions} of the managed catalog: SQL syntax beyond Spark's own grammar. */
public class ManagedExtensions implements scala.Function1<SparkSessionExtensions, BoxedUnit> {
    @Override
    public BoxedUnit apply(SparkSessionExtensions extensions) {
        return BoxedUnit.UNIT;
    }
}
