package dev.compute.boot.diagnostics;

import dev.compute.boot.PoolSizeConverter;
import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.PoolSize;
import java.lang.reflect.RecordComponent;
import java.time.Duration;
import java.util.Arrays;
import java.util.Collection;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Collectors;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.context.properties.bind.BindException;
import org.springframework.boot.context.properties.bind.UnboundConfigurationPropertiesException;
import org.springframework.boot.context.properties.source.ConfigurationProperty;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName.Form;
import org.springframework.boot.context.properties.source.ConfigurationPropertySource;
import org.springframework.boot.context.properties.source.ConfigurationPropertySources;
import org.springframework.boot.diagnostics.AbstractFailureAnalyzer;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.origin.Origin;
import org.springframework.core.Ordered;
import org.springframework.core.ResolvableType;
import org.springframework.core.convert.ConverterNotFoundException;
import org.springframework.core.env.Environment;
import org.springframework.util.unit.DataSize;

/**
 * Explains a {@code compute.*} value that Spring could not even convert ({@code leak-detection: verbose},
 * {@code max-pool-size: lots}, {@code device: first}) in the same shape as {@link InvalidSettingFailureAnalyzer}:
 * the property, the value, where it was set, and the values its type allows. Other properties are left to
 * Boot's own analyzer. So is a {@code compute.*} key left empty that the binding leaves unbound, and a value written
 * where settings go ({@code budgets: {search: 4GB}}), which Spring reports as "No converter found", naming no value.
 */
public final class ComputeBindFailureAnalyzer extends AbstractFailureAnalyzer<BindException> implements Ordered {

    private static final ConfigurationPropertyName PREFIX = ConfigurationPropertyName.of("compute");
    private static final ConfigurationPropertyName MANAGERS = PREFIX.append("managers");

    private final @Nullable Environment environment;

    public ComputeBindFailureAnalyzer(@Nullable Environment environment) {
        this.environment = environment;
    }

    @Override
    protected @Nullable FailureAnalysis analyze(Throwable rootFailure, BindException cause) {
        FailureAnalysis empty = emptyValue(rootFailure, cause);
        if (empty != null) {
            return empty;
        }
        ConfigurationProperty property = cause.getProperty();
        if (property == null && findCause(rootFailure, ConverterNotFoundException.class) != null && PREFIX.isAncestorOf(cause.getName())) {
            // a value where settings go: the binding tried to convert it to the settings and names no property
            property = written(cause.getName());
        }
        // A value that converted but broke a rule is an InvalidSettingException, which its own analyzer reports.
        if (property == null || !PREFIX.isAncestorOf(cause.getName()) || findCause(rootFailure, InvalidSettingException.class) != null) {
            return null;
        }
        Origin origin = property.getOrigin();
        // the property's own name: for a named manager's inherited settings it says where the value was set
        // (compute.managers.gpu.memory.leak-detection, or compute.memory.leak-detection), which the bound name does not
        String value = String.valueOf(property.getValue());
        Class<?> type = cause.getTarget().getType().resolve();
        String allowed = allowed(type);
        String largest = largest(type);
        if (largest != null && tooLarge(rootFailure, type, value)) {
            // its form is the one allowed: without the bound, the report would allow the very value it refuses
            allowed += ", " + largest + " (" + value.strip() + " is too large to count)";
        }
        return SettingFailure.analysis(property.getName().toString(), value, origin != null ? origin.toString() : "", allowed, cause);
    }

    /**
     * A {@code compute.*} key left empty ({@code limit:} with nothing after it) where the binding refuses what it leaves
     * unbound (a budget, a named manager, a warm-up's list): an empty value converts to nothing, so Spring reports only
     * that the element "was left unbound". The report says what its property allows, found from the bound type.
     */
    private @Nullable FailureAnalysis emptyValue(Throwable rootFailure, BindException cause) {
        UnboundConfigurationPropertiesException unbound = findCause(rootFailure, UnboundConfigurationPropertiesException.class);
        if (unbound == null || !PREFIX.isAncestorOf(cause.getName()) && !PREFIX.equals(cause.getName())) {
            return null;
        }
        for (ConfigurationProperty property : unbound.getUnboundProperties()) {
            ConfigurationPropertyName bound = asBound(cause.getName(), property.getName());
            if (!String.valueOf(property.getValue()).isBlank() || !cause.getName().isAncestorOf(bound)) {
                continue;
            }
            Class<?> type = typeAt(cause.getTarget().getType(), cause.getName(), bound);
            if (type == null) {
                continue; // a key none of the types has, empty or not, is a typo, which Boot's report names
            }
            Origin origin = property.getOrigin();
            return SettingFailure.analysis(property.getName().toString(), String.valueOf(property.getValue()), origin != null ? origin.toString() : "",
                    allowed(type), cause);
        }
        return null;
    }

    /** The value written at {@code name}, as the environment has it; null where it has none (or no environment is at hand). */
    private @Nullable ConfigurationProperty written(ConfigurationPropertyName name) {
        if (environment == null) {
            return null;
        }
        for (ConfigurationPropertySource source : ConfigurationPropertySources.get(environment)) {
            ConfigurationProperty found = source.getConfigurationProperty(name);
            if (found != null) {
                return found;
            }
        }
        return null;
    }

    /**
     * {@code name} as the binding under {@code root} sees it: a named manager's settings are bound as {@code compute.*}
     * ({@code compute.memory.pooling.warmup.host}), each property keeping its own name
     * ({@code compute.managers.gpu.memory.pooling.warmup.host[0].size}).
     */
    private static ConfigurationPropertyName asBound(ConfigurationPropertyName root, ConfigurationPropertyName name) {
        if (root.isAncestorOf(name) || !MANAGERS.isAncestorOf(name) || name.getNumberOfElements() <= MANAGERS.getNumberOfElements() + 1) {
            return name;
        }
        return ConfigurationPropertyName.adapt(PREFIX + "." + name.subName(MANAGERS.getNumberOfElements() + 1), '.');
    }

    /** The type bound at {@code name} under {@code root}, a {@code type}: through maps' values, lists' elements and records' components. */
    private static @Nullable Class<?> typeAt(ResolvableType type, ConfigurationPropertyName root, ConfigurationPropertyName name) {
        for (int i = root.getNumberOfElements(); i < name.getNumberOfElements(); i++) {
            Class<?> resolved = type.resolve();
            if (resolved == null) {
                return null;
            }
            if (Map.class.isAssignableFrom(resolved)) {
                type = type.asMap().getGeneric(1);
            } else if (Collection.class.isAssignableFrom(resolved)) {
                type = type.asCollection().getGeneric(0);
            } else if (resolved.isRecord()) {
                String element = name.getElement(i, Form.UNIFORM);
                RecordComponent component = Arrays.stream(resolved.getRecordComponents())
                        .filter(each -> each.getName().toLowerCase(Locale.ROOT).equals(element)).findFirst().orElse(null);
                if (component == null) {
                    return null;
                }
                type = ResolvableType.forType(component.getGenericType(), type);
            } else {
                return null;
            }
        }
        return type.resolve();
    }

    /**
     * Whether {@code value} failed to convert for its size alone: a size or duration past what a {@code long} counts
     * (Spring's multiplication overflowed), or a whole number past its type (a unit after it only where the type has units:
     * {@code 1st} is no whole number at all).
     */
    private boolean tooLarge(Throwable failure, @Nullable Class<?> type, String value) {
        if (findCause(failure, ArithmeticException.class) != null) {
            return true;
        }
        String number = type == DataSize.class || type == PoolSize.class || type == Duration.class ? value.strip().replaceFirst("[a-zA-Z]+$", "")
                : value.strip();
        return findCause(failure, NumberFormatException.class) != null && number.matches("[-+]?\\d+");
    }

    /** The largest value of {@code type}, in the words of application.yml; {@code null} for a type without one to say. */
    private static @Nullable String largest(@Nullable Class<?> type) {
        if (type == DataSize.class || type == PoolSize.class) {
            return "at most " + Long.MAX_VALUE / DataSize.ofTerabytes(1).toBytes() + "TB";
        }
        if (type == Duration.class) {
            return "at most " + Long.MAX_VALUE / Duration.ofDays(1).toSeconds() + "d";
        }
        if (type == int.class || type == Integer.class) {
            return "from " + Integer.MIN_VALUE + " to " + Integer.MAX_VALUE;
        }
        if (type == long.class || type == Long.class) {
            return "from " + Long.MIN_VALUE + " to " + Long.MAX_VALUE;
        }
        return null;
    }

    /** What a value of {@code type} may be, in the words of application.yml. */
    static String allowed(@Nullable Class<?> type) {
        if (type == null) {
            return "a value of the documented form";
        }
        if (type.isEnum()) {
            return "one of " + Arrays.stream(type.getEnumConstants())
                    .map(constant -> ((Enum<?>) constant).name().toLowerCase(Locale.ROOT).replace('_', '-'))
                    .collect(Collectors.joining(", "));
        }
        if (type == DataSize.class) {
            return "a size: a whole number with a unit B, KB, MB, GB or TB, such as 512MB or 4GB (a bare number is bytes)";
        }
        if (type == PoolSize.class) {
            return PoolSizeConverter.ALLOWED;
        }
        if (type == Duration.class) {
            return "a duration: a whole number with a unit ns, us, ms, s, m, h or d, such as 500ms, 30s or 5m (a bare number is milliseconds)";
        }
        if (type == boolean.class || type == Boolean.class) {
            return "true or false";
        }
        if (type == int.class || type == Integer.class || type == long.class || type == Long.class) {
            return "a whole number, such as 0 or 720";
        }
        if (type == double.class || type == Double.class || type == float.class || type == Float.class) {
            return "a number, such as 0.5";
        }
        if (type.isRecord()) { // settings: what goes under it, in the words of application.yml
            return "settings below it (" + Arrays.stream(type.getRecordComponents())
                    .map(component -> component.getName().replaceAll("([A-Z])", "-$1").toLowerCase(Locale.ROOT)).collect(Collectors.joining(", "))
                    + "), not a value of its own";
        }
        if (Map.class.isAssignableFrom(type)) {
            return "settings below it, each under its name, not a value of its own";
        }
        return "a value of type " + type.getSimpleName();
    }

    // Before Boot's BindFailureAnalyzer, which would report the conversion error without the allowed values.
    @Override
    public int getOrder() {
        return Ordered.HIGHEST_PRECEDENCE;
    }
}
