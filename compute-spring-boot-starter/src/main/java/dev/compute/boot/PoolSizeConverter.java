package dev.compute.boot;

import dev.compute.memory.PoolSize;
import java.math.BigDecimal;
import org.springframework.boot.context.properties.ConfigurationPropertiesBinding;
import org.springframework.boot.convert.ApplicationConversionService;
import org.springframework.core.convert.converter.Converter;
import org.springframework.util.unit.DataSize;

/**
 * Reads {@code compute.memory.pooling.max-pool-size}: a size as every other size property takes it ({@code 512MB},
 * {@code 4GB}, a bare number of bytes), or a share of the device's memory ({@code 80%}, {@code 12.5%}), resolved when
 * the manager starts. Only the form is checked here: a share outside (0%, 100%] or a size that is not positive is
 * refused by the manager's builder, which names the property.
 */
@ConfigurationPropertiesBinding
public final class PoolSizeConverter implements Converter<String, PoolSize> {

    /** What a value may be, in the words of application.yml; the bind failure analyzer shows it. */
    public static final String ALLOWED = "a size: a whole number with a unit B, KB, MB, GB or TB, such as 512MB or 4GB (a bare number"
            + " is bytes), or a share of the device's memory, such as 80%";

    /** Spring Boot's conversions with this one added: for a {@code Binder} made by hand (a named manager's). */
    public static ApplicationConversionService conversionService() {
        ApplicationConversionService conversion = new ApplicationConversionService();
        conversion.addConverter(new PoolSizeConverter());
        return conversion;
    }

    @Override
    public PoolSize convert(String source) {
        String value = source.strip();
        if (value.endsWith("%")) {
            return PoolSize.ofShare(new BigDecimal(value.substring(0, value.length() - 1).strip()).movePointLeft(2).doubleValue());
        }
        return PoolSize.ofBytes(DataSize.parse(value).toBytes());
    }
}
