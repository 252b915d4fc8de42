package dev.compute.boot.diagnostics;

import dev.compute.memory.InvalidSettingException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.MatchResult;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.context.properties.source.ConfigurationProperty;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName;
import org.springframework.boot.context.properties.source.ConfigurationPropertySource;
import org.springframework.boot.context.properties.source.ConfigurationPropertySources;
import org.springframework.boot.context.properties.source.IterableConfigurationPropertySource;
import org.springframework.boot.diagnostics.AbstractFailureAnalyzer;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.origin.Origin;
import org.springframework.core.Ordered;
import org.springframework.core.env.Environment;
import org.springframework.core.env.PropertySource;

/**
 * Explains a start-up stopped by an {@link InvalidSettingException}: the property, the value it was given and
 * where that value came from, what is allowed, and what to change. Where what is allowed names other
 * {@code compute.*} properties ("at most compute.memory.pooling.release-threshold"), it says where each of those
 * was set too, or that it has its default.
 */
public final class InvalidSettingFailureAnalyzer extends AbstractFailureAnalyzer<InvalidSettingException> implements Ordered {

    /**
     * A compute property named in a message: {@code compute.memory.pooling.release-threshold}, or the same key under
     * another prefix ({@code spring.test.compute.memory.pooling.release-threshold}, a test's manager).
     */
    public static final Pattern PROPERTY_IN_TEXT = Pattern.compile("(?<![\\w.-])([a-z0-9][a-z0-9-]*\\.)*compute(\\.[a-z0-9][a-z0-9-]*)+");

    private final @Nullable Environment environment;

    public InvalidSettingFailureAnalyzer(@Nullable Environment environment) {
        this.environment = environment;
    }

    @Override
    protected FailureAnalysis analyze(Throwable rootFailure, InvalidSettingException cause) {
        Map<String, String> related = new LinkedHashMap<>();
        PROPERTY_IN_TEXT.matcher(cause.allowed()).results().map(MatchResult::group).filter(name -> !name.equals(cause.property()))
                .forEach(name -> related.putIfAbsent(name, origin(name)));
        return SettingFailure.analysis(cause.property(), cause.value(), origin(cause.property()), cause.allowed(), related, cause);
    }

    /**
     * Where the value was set (a file and line, an environment variable), if the environment can tell; for a list
     * or a map (a warm-up), where its first element was set.
     */
    private String origin(String property) {
        if (environment == null || !ConfigurationPropertyName.isValid(property)) {
            return "";
        }
        ConfigurationPropertyName name = ConfigurationPropertyName.of(property);
        for (ConfigurationPropertySource source : ConfigurationPropertySources.get(environment)) {
            ConfigurationProperty found = source.getConfigurationProperty(name);
            if (found == null && source instanceof IterableConfigurationPropertySource iterable) {
                found = iterable.stream().filter(name::isAncestorOf).findFirst().map(source::getConfigurationProperty).orElse(null);
            }
            if (found != null) {
                Origin origin = found.getOrigin();
                return origin != null ? origin.toString()
                        : source.getUnderlyingSource() instanceof PropertySource<?> named ? "property source \"" + named.getName() + "\"" : "";
            }
        }
        return "";
    }

    // Before Boot's BindFailureAnalyzer, which would report a threshold rejected while binding as a generic bind error.
    @Override
    public int getOrder() {
        return Ordered.HIGHEST_PRECEDENCE;
    }
}
