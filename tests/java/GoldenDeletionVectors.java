package tablestore.spark.jvm.mirror;   // the package of the class it checks

import java.io.File;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.roaringbitmap.longlong.LongIterator;
import org.roaringbitmap.longlong.Roaring64NavigableMap;

/**
 * The Spark jar's deletion-vector decoder (DeletionVector: filestore/dvformat.py's read_dv) against the golden vectors
 * Python's tests read too (tests/data/golden/deletion_vectors.json): each case's vector, read from the golden Delta
 * DV file at its (offset, size), must hold exactly the union of its ranges; each broken one must be refused with an
 * error holding the case's text. Prints one line per mismatch and exits 1 when there is one, else prints how many
 * cases it checked.
 */
public final class GoldenDeletionVectors {
    private GoldenDeletionVectors() {
    }

    public static void main(String[] args) throws Exception {
        JsonNode doc = new ObjectMapper().readTree(new File(args[0]));
        byte[] file = HexFormat.of().parseHex(doc.get("file").asText());
        List<String> failures = new ArrayList<>();
        int checked = 0;
        for (JsonNode c : doc.get("cases")) {
            String name = c.get("name").asText();
            int offset = c.get("offset").asInt();
            int size = c.get("size").asInt();
            try {
                Roaring64NavigableMap got = DeletionVector.decodeFramed(
                    Arrays.copyOfRange(file, offset, offset + size + 8), size);
                String wrong = compare(got, c.get("ranges"), c.get("cardinality").asLong());
                if (wrong != null) {
                    failures.add(name + ": " + wrong);
                }
            } catch (Exception e) {
                failures.add(name + ": " + e);
            }
            checked++;
        }
        for (JsonNode b : doc.get("bad")) {
            String name = b.get("name").asText();
            try {
                DeletionVector.decodeFramed(HexFormat.of().parseHex(b.get("framed").asText()), b.get("size").asInt());
                failures.add(name + ": not refused");
            } catch (DeletionVector.FormatException e) {
                if (!e.getMessage().contains(b.get("error").asText())) {
                    failures.add(name + ": refused with \"" + e.getMessage() + "\"");
                }
            }
            checked++;
        }
        failures.forEach(System.out::println);
        System.out.println(checked + " cases, " + failures.size() + " failures");
        System.exit(failures.isEmpty() ? 0 : 1);
    }

    /** Null when {@code got} holds exactly the union of {@code ranges} ([start, stop, step) each), else why not. */
    private static String compare(Roaring64NavigableMap got, JsonNode ranges, long cardinality) {
        if (got.getLongCardinality() != cardinality) {
            return "cardinality " + got.getLongCardinality() + ", expected " + cardinality;
        }
        for (JsonNode r : ranges) {
            for (long p = r.get(0).asLong(); Long.compareUnsigned(p, r.get(1).asLong()) < 0; p += r.get(2).asLong()) {
                if (!got.contains(p)) {
                    return "position " + Long.toUnsignedString(p) + " missing";
                }
            }
        }
        LongIterator it = got.getLongIterator();
        long previous = -1;
        while (it.hasNext()) {
            long p = it.next();
            if (previous != -1 && Long.compareUnsigned(p, previous) <= 0) {
                return "positions out of order at " + Long.toUnsignedString(p);
            }
            previous = p;
        }
        return null;
    }
}
