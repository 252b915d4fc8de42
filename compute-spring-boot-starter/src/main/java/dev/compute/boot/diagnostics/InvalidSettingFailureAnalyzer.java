package dev.compute.boot.diagnostics;

import dev.compute.memory.InvalidSettingException;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.context.properties.source.ConfigurationProperty;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName;
import org.springframework.boot.context.properties.source.ConfigurationPropertySource;
import org.springframework.boot.context.properties.source.ConfigurationPropertySources;
import org.springframework.boot.diagnostics.AbstractFailureAnalyzer;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.origin.Origin;
import org.springframework.core.Ordered;
import org.springframework.core.env.Environment;

/**
 * Explains a start-up stopped by an {@link InvalidSettingException}: the property, the value it was given and
 * where that value came from, what is allowed, and what to change.
 */
public final class InvalidSettingFailureAnalyzer extends AbstractFailureAnalyzer<InvalidSettingException> implements Ordered {

    private final @Nullable Environment environment;

    public InvalidSettingFailureAnalyzer(@Nullable Environment environment) {
        this.environment = environment;
    }

    @Override
    protected FailureAnalysis analyze(Throwable rootFailure, InvalidSettingException cause) {
        return SettingFailure.analysis(cause.property(), cause.value(), origin(cause.property()), cause.allowed(), cause);
    }

    /** Where the bad value was set (a file and line, an environment variable), if the environment can tell. */
    private String origin(String property) {
        if (environment == null || !ConfigurationPropertyName.isValid(property)) {
            return "";
        }
        ConfigurationPropertyName name = ConfigurationPropertyName.of(property);
        for (ConfigurationPropertySource source : ConfigurationPropertySources.get(environment)) {
            ConfigurationProperty found = source.getConfigurationProperty(name);
            if (found != null) {
                Origin origin = found.getOrigin();
                return origin != null ? origin.toString() : "";
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
