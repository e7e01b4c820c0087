package tablestore.spark.jvm.catalog;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Function;

/**
 * The statements of the managed catalog that Spark's grammar lacks, rewritten into procedure calls its grammar has:
 * <pre>
 *   DESCRIBE DETAIL [TABLE] name [PARTITION (k = v, ...)]   -&gt;  CALL cat.system.describe_detail(table =&gt; 'db.t', partition =&gt; 'k=v,...')
 *   ALTER TABLE name [PARTITION (k = v, ...)] COMPACT         -&gt;  CALL cat.system.compact(table =&gt; 'db.t', partitions =&gt; 'k=v,...')
 *   OPTIMIZE name [WHERE predicate]                           -&gt;  CALL cat.system.compact(table =&gt; 'db.t', where =&gt; 'predicate')
 *   DESCRIBE HISTORY name [LIMIT n]                           -&gt;  SELECT * FROM cat.db.`t$snapshots` ORDER BY snapshot_id DESC [LIMIT n]
 * </pre>
 * ({@code OPTIMIZE} and {@code DESCRIBE HISTORY} are Delta's statements.)
 * Keywords in any case, names plain or backticked, comments, a trailing semicolon. Anything else, and names that
 * are not tables of a managed catalog, are not rewritten ({@code null}): the delegate parser sees them unchanged.
 * Pure (no Spark state): the caller resolves names.
 */
final class SqlRewrite {
    /** Rewrite failures that are the user's (a value the text form cannot carry). */
    static final class RewriteException extends RuntimeException {
        RewriteException(String message) {
            super(message);
        }
    }

    private enum Kind { WORD, QUOTED_NAME, STRING, NUMBER, PUNCT }

    private record Token(Kind kind, String text) {
        boolean is(String keyword) {
            return (kind == Kind.WORD || kind == Kind.PUNCT) && text.equalsIgnoreCase(keyword);
        }
    }

    private final List<Token> tokens;
    private int pos;

    private SqlRewrite(List<Token> tokens) {
        this.tokens = tokens;
    }

    /**
     * The CALL statement for {@code sql}, or null when it is not one of ours. {@code resolve}: a name's parts to
     * {catalog, database, table} when they name a table of a managed catalog, else null.
     */
    static String rewrite(String sql, Function<List<String>, String[]> resolve) {
        String set = quoteSetKey(sql);
        if (set != null) {
            return set;
        }
        int start = afterComments(sql);
        if (sql.regionMatches(true, start, "OPTIMIZE", 0, 8)) {
            return optimize(sql.substring(start), resolve);
        }
        if (!startsWithOurKeyword(sql)) {
            return null;   // cheap: most statements (a long INSERT ... VALUES) are never tokenized
        }
        List<Token> tokens = tokenize(sql);
        if (tokens == null) {
            return null;
        }
        return new SqlRewrite(tokens).statement(resolve);
    }

    private String statement(Function<List<String>, String[]> resolve) {
        String procedure;
        List<String> name;
        Map<String, String> spec;
        if (accept("DESCRIBE") || accept("DESC")) {
            if (accept("HISTORY")) {
                return history(resolve);
            }
            if (!accept("DETAIL")) {
                return null;
            }
            accept("TABLE");
            procedure = "describe_detail";
            name = name();
            spec = partitionSpec();
        } else if (accept("ALTER")) {
            if (!accept("TABLE")) {
                return null;
            }
            procedure = "compact";
            name = name();
            spec = partitionSpec();
            if (!accept("COMPACT")) {
                return null;
            }
        } else {
            return null;
        }
        while (accept(";")) {
            // trailing semicolons
        }
        if (name == null || spec == null || pos != tokens.size()) {
            return null;
        }
        String[] table = resolve.apply(name);
        if (table == null) {
            return null;
        }
        StringBuilder call = new StringBuilder("CALL ").append(quoteName(table[0])).append(".system.")
            .append(procedure).append("(table => ").append(literal(table[1] + "." + table[2]));
        if (!spec.isEmpty()) {
            List<String> pairs = new ArrayList<>();
            for (Map.Entry<String, String> e : spec.entrySet()) {
                pairs.add(e.getKey() + "=" + e.getValue());
            }
            call.append(procedure.equals("compact") ? ", partitions => " : ", partition => ")
                .append(literal(String.join(",", pairs)));
        }
        return call.append(")").toString();
    }

    /** DESCRIBE HISTORY [TABLE] name [LIMIT n]: the table's commits, newest first, as {@code $snapshots} has them. */
    private String history(Function<List<String>, String[]> resolve) {
        accept("TABLE");
        List<String> name = name();
        String limit = null;
        if (accept("LIMIT")) {
            if (pos >= tokens.size() || tokens.get(pos).kind != Kind.NUMBER) {
                return null;
            }
            limit = tokens.get(pos++).text;
        }
        while (accept(";")) {
            // trailing semicolons
        }
        String[] table = name == null || pos != tokens.size() ? null : resolve.apply(name);
        if (table == null) {
            return null;
        }
        return "SELECT * FROM " + quoteName(table[0]) + "." + quoteName(table[1]) + "." + quoteName(table[2] + "$snapshots")
            + " ORDER BY snapshot_id DESC" + (limit == null ? "" : " LIMIT " + limit);
    }

    private static final java.util.regex.Pattern OPTIMIZE = java.util.regex.Pattern.compile(
        "(?is)^OPTIMIZE\\s+(.+?)(?:\\s+WHERE\\s+(.+?))?[\\s;]*$");

    /** OPTIMIZE name [WHERE predicate]: the predicate goes to Spark as it is written (it may hold any SQL). */
    private static String optimize(String sql, Function<List<String>, String[]> resolve) {
        java.util.regex.Matcher m = OPTIMIZE.matcher(sql);
        if (!m.matches()) {
            return null;
        }
        List<Token> nameTokens = tokenize(m.group(1));
        if (nameTokens == null) {
            return null;
        }
        SqlRewrite parser = new SqlRewrite(nameTokens);
        List<String> name = parser.name();
        String[] table = name == null || parser.pos != nameTokens.size() ? null : resolve.apply(name);
        if (table == null) {
            return null;
        }
        return "CALL " + quoteName(table[0]) + ".system.compact(table => " + literal(table[1] + "." + table[2])
            + (m.group(2) == null ? "" : ", where => " + literal(m.group(2).trim())) + ")";
    }

    private boolean accept(String keyword) {
        if (pos < tokens.size() && tokens.get(pos).is(keyword)) {
            pos++;
            return true;
        }
        return false;
    }

    private List<String> name() {
        List<String> parts = new ArrayList<>();
        do {
            if (pos >= tokens.size()) {
                return null;
            }
            Token t = tokens.get(pos);
            if (t.kind != Kind.WORD && t.kind != Kind.QUOTED_NAME) {
                return null;
            }
            parts.add(t.text);
            pos++;
        } while (accept("."));
        return parts;
    }

    /** {} without PARTITION, null when malformed. */
    private Map<String, String> partitionSpec() {
        Map<String, String> spec = new LinkedHashMap<>();
        if (!accept("PARTITION")) {
            return spec;
        }
        if (!accept("(")) {
            return null;
        }
        do {
            if (pos + 2 >= tokens.size()) {
                return null;
            }
            Token key = tokens.get(pos);
            Token eq = tokens.get(pos + 1);
            Token value = tokens.get(pos + 2);
            if ((key.kind != Kind.WORD && key.kind != Kind.QUOTED_NAME) || !eq.is("=")) {
                return null;
            }
            if (value.is("NULL")) {
                throw new RewriteException("PARTITION (" + key.text + " = NULL): DESCRIBE DETAIL and COMPACT "
                    + "cannot select the null partition; leave out PARTITION to see or compact every partition");
            }
            if (value.kind != Kind.STRING && value.kind != Kind.NUMBER && !value.is("TRUE") && !value.is("FALSE")) {
                return null;
            }
            String text = value.kind == Kind.WORD ? value.text.toLowerCase(Locale.ROOT) : value.text;
            if (text.contains(",") || text.contains(";") || text.contains("=")) {
                throw new RewriteException("PARTITION (" + key.text + " = '" + text + "'): partition values with "
                    + "',', ';' or '=' are not supported by DESCRIBE DETAIL and COMPACT");
            }
            spec.put(key.text, text);
            pos += 3;
        } while (accept(","));
        return accept(")") ? spec : null;
    }

    /** A SET statement's key of letters, digits, '_', '.', ':' and '-' with a '-' in it. */
    private static final java.util.regex.Pattern SET_KEY = java.util.regex.Pattern.compile(
        "(?is)^\\s*SET\\s+([A-Za-z0-9_.:]*-[A-Za-z0-9_.:-]*)\\s*=(.*?)[\\s;]*$");

    /**
     * {@code SET spark.sql.catalog.managed.table-storage.bucket = 4}: Spark's own SET accepts a key with a '-' only
     * in backquotes (the catalog's session options all have one: {@code table-storage.}); the key is quoted for it.
     * Null for any other statement.
     */
    static String quoteSetKey(String sql) {
        java.util.regex.Matcher m = SET_KEY.matcher(sql);
        return m.matches() ? "SET `" + m.group(1) + "` =" + m.group(2) : null;
    }

    private static boolean startsWithOurKeyword(String sql) {
        int i = afterComments(sql);
        return sql.regionMatches(true, i, "DESC", 0, 4) || sql.regionMatches(true, i, "ALTER", 0, 5);
    }

    /** The index of the statement's first character after leading whitespace and comments. */
    private static int afterComments(String sql) {
        int i = 0;
        int n = sql.length();
        while (i < n) {
            if (Character.isWhitespace(sql.charAt(i))) {
                i++;
            } else if (sql.startsWith("--", i)) {
                int end = sql.indexOf('\n', i);
                i = end < 0 ? n : end + 1;
            } else if (sql.startsWith("/*", i)) {
                int end = sql.indexOf("*/", i + 2);
                i = end < 0 ? n : end + 2;
            } else {
                break;
            }
        }
        return i;
    }

    static String literal(String text) {
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'";
    }

    static String quoteName(String name) {
        return "`" + name.replace("`", "``") + "`";
    }

    /** Tokens of the statement, without whitespace and comments; null when it cannot be one of ours. */
    private static List<Token> tokenize(String sql) {
        List<Token> out = new ArrayList<>();
        int i = 0;
        int n = sql.length();
        while (i < n) {
            char c = sql.charAt(i);
            if (Character.isWhitespace(c)) {
                i++;
            } else if (c == '-' && i + 1 < n && sql.charAt(i + 1) == '-') {
                while (i < n && sql.charAt(i) != '\n') {
                    i++;
                }
            } else if (c == '/' && i + 1 < n && sql.charAt(i + 1) == '*') {
                int end = sql.indexOf("*/", i + 2);
                if (end < 0) {
                    return null;
                }
                i = end + 2;
            } else if (c == '`') {
                StringBuilder b = new StringBuilder();
                i++;
                while (true) {
                    if (i >= n) {
                        return null;
                    }
                    char d = sql.charAt(i);
                    if (d == '`') {
                        if (i + 1 < n && sql.charAt(i + 1) == '`') {
                            b.append('`');
                            i += 2;
                            continue;
                        }
                        i++;
                        break;
                    }
                    b.append(d);
                    i++;
                }
                out.add(new Token(Kind.QUOTED_NAME, b.toString()));
            } else if (c == '\'' || c == '"') {
                StringBuilder b = new StringBuilder();
                i++;
                while (true) {
                    if (i >= n) {
                        return null;
                    }
                    char d = sql.charAt(i);
                    if (d == '\\' && i + 1 < n) {
                        b.append(sql.charAt(i + 1));
                        i += 2;
                    } else if (d == c) {
                        i++;
                        break;
                    } else {
                        b.append(d);
                        i++;
                    }
                }
                out.add(new Token(Kind.STRING, b.toString()));
            } else if (Character.isDigit(c) || ((c == '-' || c == '+') && i + 1 < n
                    && Character.isDigit(sql.charAt(i + 1)) && !out.isEmpty() && out.get(out.size() - 1).is("="))) {
                int start = i++;
                while (i < n && (Character.isLetterOrDigit(sql.charAt(i)) || sql.charAt(i) == '.')) {
                    i++;
                }
                String number = sql.substring(start, i);
                out.add(new Token(number.chars().allMatch(ch -> Character.isDigit(ch) || ch == '-' || ch == '+'
                    || ch == '.') ? Kind.NUMBER : Kind.WORD, number));
            } else if (Character.isLetter(c) || c == '_') {
                int start = i;
                while (i < n && (Character.isLetterOrDigit(sql.charAt(i)) || sql.charAt(i) == '_')) {
                    i++;
                }
                out.add(new Token(Kind.WORD, sql.substring(start, i)));
            } else if ("().,=;".indexOf(c) >= 0) {
                out.add(new Token(Kind.PUNCT, String.valueOf(c)));
                i++;
            } else {
                return null;
            }
        }
        return out;
    }
}
