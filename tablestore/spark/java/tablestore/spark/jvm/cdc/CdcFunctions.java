package tablestore.spark.jvm.cdc;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.Base64;

/**
 * Static functions the CDC decoder (tablestore/spark/cdc_decode.py, its Python owner) calls through Spark SQL's
 * {@code reflect()}, for the encodings Spark's own expressions cannot read exactly.
 */
public final class CdcFunctions {
    private CdcFunctions() {
    }

    /**
     * Kafka Connect's {@code Decimal} (Debezium's default {@code decimal.handling.mode=precise}): the unscaled value
     * as big-endian two's-complement bytes, base64 in JSON, and the scale from the schema. Returns the plain decimal
     * text ({@code "-12.34"}), or null when {@code base64} is not base64 (the decoder then reports the value).
     */
    public static String decimalFromBase64(String base64, int scale) {
        if (base64 == null) {
            return null;
        }
        byte[] bytes;
        try {
            bytes = Base64.getDecoder().decode(base64);
        } catch (IllegalArgumentException e) {
            return null;
        }
        if (bytes.length == 0) {
            return null;
        }
        return new BigDecimal(new BigInteger(bytes), scale).toPlainString();
    }
}
