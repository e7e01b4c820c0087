package tablestore.spark.jvm.catalog;

import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.Cast;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;

import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Catalyst plan and expression nodes built from Java for the row-level rewrite ({@link RowLevelRewrite}). Scala
 * case classes gain trailing parameters with defaults from one Spark version to the next (a hint, a schema
 * evolution flag, an exprId); {@link #make} calls the shortest public constructor (or static factory) that takes
 * the given leading arguments and fills the rest with their defaults (None, Nil, false, an empty Map, options or
 * Metadata, a fresh ExprId), so one source serves every supported Spark.
 */
final class Catalyst {
    private Catalyst() {
    }

    static <T> scala.collection.immutable.Seq<T> seq(List<T> items) {
        return CollectionConverters.asScala(items).toList();
    }

    @SafeVarargs
    static <T> scala.collection.immutable.Seq<T> seq(T... items) {
        return seq(List.of(items));
    }

    static <T> List<T> list(scala.collection.Iterable<T> items) {
        return new ArrayList<>(CollectionConverters.asJavaCollection(items));
    }

    static Literal string(String text) {
        return Literal.create(text, DataTypes.StringType);
    }

    static Literal nullOf(DataType type) {
        return Literal.create(null, type);
    }

    /** {@code expr} cast to {@code type} (the session's time zone, its ANSI mode), unless already of it. */
    static Expression cast(Expression expr, DataType type) {
        if (expr.dataType().equals(type)) {
            return expr;
        }
        return new Cast(expr, type, Option.apply(SQLConf.get().sessionLocalTimeZone()));
    }

    static Alias alias(Expression child, String name) {
        return make(Alias.class, child, name);
    }

    static AttributeReference attribute(String name, DataType type) {
        return make(AttributeReference.class, name, type, true, Metadata.empty());
    }

    static Attribute attributeOf(NamedExpression named) {
        return named.toAttribute();
    }

    /** A case class of Catalyst's from its leading constructor arguments (see the class comment). */
    static <T> T make(Class<T> cls, Object... args) {
        Constructor<?> best = null;
        for (Constructor<?> c : cls.getConstructors()) {
            if (fits(c.getParameterTypes(), args) && (best == null
                    || c.getParameterCount() < best.getParameterCount())) {
                best = c;
            }
        }
        if (best == null) {
            throw new IllegalStateException("no constructor of " + cls.getName() + " takes " + args.length
                + " leading arguments of these types");
        }
        try {
            return cls.cast(best.newInstance(padded(best.getParameterTypes(), args)));
        } catch (InstantiationException | IllegalAccessException e) {
            throw new IllegalStateException(e);
        } catch (InvocationTargetException e) {
            throw rethrow(e.getCause());
        }
    }

    /** A static factory {@code name} of {@code cls} (a Scala companion's forwarder) from its leading arguments. */
    static <T> T call(Class<?> cls, Class<T> result, String name, Object... args) {
        Method best = null;
        for (Method m : cls.getMethods()) {
            if (m.getName().equals(name) && Modifier.isStatic(m.getModifiers())
                    && fits(m.getParameterTypes(), args)
                    && (best == null || m.getParameterCount() < best.getParameterCount())) {
                best = m;
            }
        }
        if (best == null) {
            throw new IllegalStateException("no " + cls.getName() + "." + name + " takes these arguments");
        }
        try {
            return result.cast(best.invoke(null, padded(best.getParameterTypes(), args)));
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        } catch (InvocationTargetException e) {
            throw rethrow(e.getCause());
        }
    }

    private static RuntimeException rethrow(Throwable t) {
        return t instanceof RuntimeException ? (RuntimeException) t : new IllegalStateException(t);
    }

    private static boolean fits(Class<?>[] types, Object[] args) {
        if (types.length < args.length) {
            return false;
        }
        for (int i = 0; i < args.length; i++) {
            if (args[i] != null && !boxed(types[i]).isInstance(args[i])) {
                return false;
            }
        }
        for (int i = args.length; i < types.length; i++) {
            if (defaultOf(types[i]) == null) {
                return false;
            }
        }
        return true;
    }

    private static Object[] padded(Class<?>[] types, Object[] args) {
        Object[] out = new Object[types.length];
        System.arraycopy(args, 0, out, 0, args.length);
        for (int i = args.length; i < types.length; i++) {
            out[i] = defaultOf(types[i]);
        }
        return out;
    }

    private static Object defaultOf(Class<?> type) {
        if (type == Option.class) {
            return Option.empty();
        }
        if (type == boolean.class) {
            return false;
        }
        if (type.isAssignableFrom(scala.collection.immutable.Nil$.class)) {
            return scala.collection.immutable.Nil$.MODULE$;
        }
        if (type == scala.collection.immutable.Map.class) {
            return scala.collection.immutable.Map$.MODULE$.empty();
        }
        if (type == org.apache.spark.sql.util.CaseInsensitiveStringMap.class) {
            return org.apache.spark.sql.util.CaseInsensitiveStringMap.empty();
        }
        if (type == Metadata.class) {
            return Metadata.empty();
        }
        if (type == org.apache.spark.sql.catalyst.expressions.ExprId.class) {
            return NamedExpression.newExprId();
        }
        return null;
    }

    private static Class<?> boxed(Class<?> type) {
        if (type == boolean.class) {
            return Boolean.class;
        }
        if (type == int.class) {
            return Integer.class;
        }
        if (type == long.class) {
            return Long.class;
        }
        return type;
    }
}
