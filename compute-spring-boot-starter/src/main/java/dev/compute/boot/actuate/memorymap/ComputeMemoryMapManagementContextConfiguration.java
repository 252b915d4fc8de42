package dev.compute.boot.actuate.memorymap;

import java.net.URI;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.actuate.autoconfigure.endpoint.web.WebEndpointProperties;
import org.springframework.boot.actuate.autoconfigure.web.ManagementContextConfiguration;
import org.springframework.boot.actuate.autoconfigure.web.ManagementContextType;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.ImportRuntimeHints;
import org.springframework.core.env.Environment;
import org.springframework.core.io.ClassPathResource;
import org.springframework.core.io.Resource;
import org.springframework.http.CacheControl;
import org.springframework.http.MediaType;
import org.springframework.web.servlet.function.RouterFunction;
import org.springframework.web.servlet.function.RouterFunctions;
import org.springframework.web.servlet.function.ServerResponse;

/**
 * Serves the memory map page at {@code {management base path}/computememory-map/} (by default
 * {@code /actuator/computememory-map/}), in the management context: on the application's port, or on
 * {@code management.server.port} when that is set. Being there, the page and the {@code computememory} endpoint
 * share one origin, so the page fetches the endpoint without CORS, whichever port serves Actuator.
 *
 * <p>The page is three static files from this jar ({@code META-INF/compute/memory-map/}); it carries no data of its
 * own and shows nothing unless the {@code computememory} endpoint is exposed over HTTP, which is why it is on by
 * default; {@code compute.memory-map.enabled=false} removes it. Spring MVC (servlet) applications only.
 */
@ManagementContextConfiguration(value = ManagementContextType.ANY, proxyBeanMethods = false)
@ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
@ConditionalOnClass(RouterFunctions.class)
@ConditionalOnBooleanProperty(name = "compute.memory-map.enabled", matchIfMissing = true)
@ImportRuntimeHints(MemoryMapPageRuntimeHints.class)
public class ComputeMemoryMapManagementContextConfiguration {

    /** The page's path below the management base path; the page's script relies on this name to find the base path. */
    public static final String PATH = "/computememory-map";

    static final String LOCATION = "META-INF/compute/memory-map/";

    @Bean
    RouterFunction<ServerResponse> computeMemoryMapRouterFunction(ObjectProvider<WebEndpointProperties> endpoints, Environment environment) {
        // Actuator's own bean where its web endpoints are configured; bound here otherwise, so the page never stops start-up
        WebEndpointProperties properties = endpoints.getIfAvailable(() -> Binder.get(environment)
                .bind("management.endpoints.web", WebEndpointProperties.class).orElseGet(WebEndpointProperties::new));
        String page = properties.getBasePath() + PATH;
        Resource index = new ClassPathResource(LOCATION + "index.html");
        // no-cache: a browser revalidates, so a new version of the starter is picked up on the next load
        CacheControl revalidate = CacheControl.noCache();
        return RouterFunctions.route()
                // relative links in the page resolve below the trailing slash
                .GET(page, request -> ServerResponse.status(302).location(URI.create(PATH.substring(1) + "/")).build())
                .GET(page + "/", request -> ServerResponse.ok().contentType(MediaType.TEXT_HTML).cacheControl(revalidate).body(index))
                .add(RouterFunctions.resources(page + "/**", new ClassPathResource(LOCATION),
                        (resource, headers) -> headers.setCacheControl(revalidate)))
                .build();
    }
}
