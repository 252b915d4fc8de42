package dev.compute.sample;

import dev.compute.memory.InvalidSettingException;
import java.time.Duration;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * The bound on requests that carry whole vectors ({@link HeavyRequest}) running at once. On virtual threads Tomcat
 * takes every connection, so without it a burst of the largest requests (each several hundred MB of heap while its
 * arrays are read, computed and written) fills the heap.
 *
 * @param maxConcurrent How many such requests run at once.
 * @param maxWait How long one more waits for one of them to end before it is answered 503.
 * @param retryAfter What the 503's {@code Retry-After} header tells the client to wait (whole seconds).
 */
@ConfigurationProperties("sample.heavy-requests")
public record HeavyRequestProperties(
        @DefaultValue("4") int maxConcurrent,
        @DefaultValue("100ms") Duration maxWait,
        @DefaultValue("1s") Duration retryAfter) {

    // InvalidSettingException, so the starter's failure analyzer reports these as it does compute.* settings.
    public HeavyRequestProperties {
        if (maxConcurrent < 1) {
            throw new InvalidSettingException("sample.heavy-requests.max-concurrent", maxConcurrent, "a number of requests of 1 or more, such as 4");
        }
        if (maxWait.isNegative()) {
            throw new InvalidSettingException("sample.heavy-requests.max-wait", maxWait, "a duration of 0 or more, such as 100ms");
        }
        if (retryAfter.toSeconds() < 1) {
            throw new InvalidSettingException("sample.heavy-requests.retry-after", retryAfter, "a duration of a second or more, such as 1s");
        }
    }
}
