package dev.compute.sample;

import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.stereotype.Component;
import org.springframework.web.method.HandlerMethod;
import org.springframework.web.servlet.HandlerInterceptor;
import org.springframework.web.servlet.config.annotation.InterceptorRegistry;
import org.springframework.web.servlet.config.annotation.WebMvcConfigurer;

/**
 * Runs at most {@code sample.heavy-requests.max-concurrent} {@link HeavyRequest} handlers at once; one more waits up
 * to {@code max-wait} for a permit, then is refused with {@link BusyException} (503 with {@code Retry-After}). The
 * permit is taken before the handler's arguments are resolved, so a refused request's body is never read: the heap
 * holds the arrays of the admitted requests only. It brings its settings, so that a {@code @WebMvcTest} of the
 * controllers, which takes it as it takes every {@code WebMvcConfigurer}, runs under the same bound.
 */
@Component
@EnableConfigurationProperties(HeavyRequestProperties.class)
public class HeavyRequestLimit implements HandlerInterceptor, WebMvcConfigurer {

    private static final String PERMIT = HeavyRequestLimit.class.getName() + ".permit";

    private final HeavyRequestProperties properties;
    private final Semaphore permits;

    public HeavyRequestLimit(HeavyRequestProperties properties) {
        this.properties = properties;
        this.permits = new Semaphore(properties.maxConcurrent());
    }

    @Override
    public void addInterceptors(InterceptorRegistry registry) {
        registry.addInterceptor(this);
    }

    @Override
    public boolean preHandle(HttpServletRequest request, HttpServletResponse response, Object handler) {
        if (!(handler instanceof HandlerMethod method) || !method.hasMethodAnnotation(HeavyRequest.class)) {
            return true;
        }
        boolean acquired;
        try {
            acquired = permits.tryAcquire(properties.maxWait().toNanos(), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            acquired = false;
        }
        if (!acquired) {
            throw new BusyException(properties);
        }
        request.setAttribute(PERMIT, Boolean.TRUE);
        return true;
    }

    // Called once the request is done, however it ended; the attribute makes sure only a taken permit is given back.
    @Override
    public void afterCompletion(HttpServletRequest request, HttpServletResponse response, Object handler, @Nullable Exception ex) {
        if (request.getAttribute(PERMIT) != null) {
            request.removeAttribute(PERMIT);
            permits.release();
        }
    }

    /** As many requests carrying vectors as the service runs at once are running: the client should retry later. */
    public static final class BusyException extends RuntimeException {

        private final long retryAfterSeconds;

        BusyException(HeavyRequestProperties properties) {
            super("the service runs at most " + properties.maxConcurrent() + " requests carrying vectors at once"
                    + " (sample.heavy-requests.max-concurrent) and as many are running: try again in "
                    + properties.retryAfter().toSeconds() + " s");
            this.retryAfterSeconds = properties.retryAfter().toSeconds();
        }

        public long retryAfterSeconds() {
            return retryAfterSeconds;
        }
    }
}
