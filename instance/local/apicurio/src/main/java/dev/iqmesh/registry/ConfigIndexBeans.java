package dev.iqmesh.registry;

import io.apicurio.common.apps.config.DynamicConfigPropertyList;

import javax.enterprise.context.ApplicationScoped;
import javax.enterprise.inject.Produces;
import java.util.List;

/**
 * The bean that Apicurio's config-index Quarkus extension generates at build time (its deployment
 * half is not on Maven Central): the list of dynamic properties, here none: the registry's settings
 * are read at start, which is all a test registry needs.
 */
@ApplicationScoped
public class ConfigIndexBeans {

    @Produces
    @ApplicationScoped
    DynamicConfigPropertyList dynamicConfigProperties() {
        return new DynamicConfigPropertyList(List.of());
    }
}
